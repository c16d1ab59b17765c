"""What may become a policy, checked when it is defined, and tools with
arguments fixed by the program.

A policy returns one value, recorded as its step's result. An async generator
(or a plain generator) yields many and returns none that could be recorded,
so it is refused when it is made a policy, with its name, not when a model
first calls it mid-run.

``functools.partial(tool, account_id=7)`` offered as an option is a tool
whose ``account_id`` the program sets: the model is not shown it and cannot
give it. :func:`with_bound_arguments` makes such a partial a plain function
whose signature lacks the bound parameters (so the schema a model sees lacks
them too), which calls the tool with them, and which tells the schema
(:mod:`.schema`) their names, so a model that sends one anyway reads an
error that says so.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from .schema import BOUND

__all__ = ["check_definable", "with_bound_arguments"]


def check_definable(fn: Any, name: str | None) -> None:
    """Refuse what cannot be a policy, naming it: not callable, or a
    generator (async or not), whose many values no step could record."""
    label = name or getattr(fn, "__name__", None) or repr(fn)
    if not callable(fn):
        raise TypeError(f"policy {label!r}: {fn!r} is not callable, so it cannot be a policy")
    target = fn
    if isinstance(fn, functools.partial):
        target = fn.func
    if not (inspect.isroutine(target) or isinstance(target, type)):
        target = type(target).__call__  # an object with a __call__: that method
    where = getattr(target, "__qualname__", None)
    where = f" ({getattr(target, '__module__', '?')}.{where})" if where and where != label else ""
    if inspect.isasyncgenfunction(target):
        raise TypeError(
            f"policy {label!r}{where} is an async generator function: a policy returns one value, "
            "recorded as its step's result, and a generator's items could not be replayed. "
            "Collect the items and return the list, or stream them with ctx.emit(...) "
            "and return a summary"
        )
    if inspect.isgeneratorfunction(target):
        raise TypeError(
            f"policy {label!r}{where} is a generator function: a policy returns one value, "
            "recorded as its step's result. Return a list instead"
        )


def with_bound_arguments(
    partial: functools.partial[Any], func: Callable[..., Any], name: str | None
) -> Callable[..., Any]:
    """``partial`` as a function of the arguments it leaves open.

    ``func`` is the function the partial calls in the end (a policy's own
    function when the partial wraps a policy, so calling it is one step, not a
    step inside a step). Only keyword arguments may be bound: a positional one
    would land on the injected context of a tool that takes one, so it is
    refused here, with the way to write it.
    """
    label = name or getattr(func, "__name__", None) or repr(partial)
    if partial.args:
        raise TypeError(
            f"policy {label!r}: bind its arguments by keyword "
            f"(functools.partial(tool, name=value)), not by position: {partial.args!r}"
        )
    target = func
    if not (inspect.isroutine(func) or isinstance(func, type)):
        target = type(func).__call__.__get__(func)  # a class policy: its __call__
    check_definable(target, label)
    sig = inspect.signature(target)
    params = sig.parameters
    open_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    bound = dict(partial.keywords)
    for arg in bound:
        p = params.get(arg)
        if (p is None and not open_kwargs) or (
            p is not None and p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL)
        ):
            known = ", ".join(params) or "(none)"
            raise TypeError(
                f"policy {label!r}: functools.partial binds {arg!r}, which is not a keyword "
                f"argument of {getattr(target, '__qualname__', target)!r} (its parameters: {known})"
            )
    kept = [p for n, p in params.items() if n not in bound]
    annotations = {
        n: a for n, a in getattr(target, "__annotations__", {}).items() if n not in bound
    }

    if inspect.iscoroutinefunction(target):

        async def call_async(*args: Any, **kwargs: Any) -> Any:
            return await target(*args, **kwargs, **bound)

        tool: Callable[..., Any] = call_async
    else:

        def call_sync(*args: Any, **kwargs: Any) -> Any:
            return target(*args, **kwargs, **bound)

        tool = call_sync
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        value = getattr(func, attr, None)
        if value is not None:
            setattr(tool, attr, value)
    if name:
        tool.__name__ = name
    tool.__signature__ = sig.replace(parameters=kept)  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    # Type hints written as strings resolve in the tool's own module:
    # typing.get_type_hints follows __wrapped__ to find its globals.
    tool.__wrapped__ = target  # type: ignore[attr-defined]
    setattr(tool, BOUND, frozenset(bound))
    return tool
