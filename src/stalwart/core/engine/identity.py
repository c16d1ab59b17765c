"""A step's identity as recorded and compared on replay (S1, S5): its
arguments (offered options by name), their JSON and hash.

What is new in a step's list arguments, recorded and hashed incrementally,
is :mod:`.argslog`'s.
"""

from __future__ import annotations

import json
from typing import Any

from .. import codec
from ..errors import DuplicatePolicy, SerializationError
from ..message import Message
from ..policy import Policy, ToolSpec, as_policy, same_policy, where_defined
from ..recorded import SCALARS
from ..stepargs import args_digest

# The keyword a caller offers policies with (``ctx.call(llm, options=[...])``),
# public API, which makes a step an options dispatch (.dispatch). Inside the
# core "options" means only this; a policy's own settings are
# ``Policy.settings()`` and ``Policy.with_settings``.
OPTIONS = "options"

__all__ = [
    "OPTIONS",
    "args_for_record",
    "arguments_of",
    "check_keywords",
    "identity_json",
    "is_option",
    "option_policies",
    "record_json",
    "scalars_json",
    "step_hash",
    "strip_ids",
]


def arguments_of(key: str, run_id: str | None = None) -> str:
    """How an error names a step's arguments: with the run when it is known
    (a worker executes many runs, and step keys repeat in each); a path into
    the value (``['*'][0]``) may follow."""
    if run_id is None:
        return f"arguments of step {key}"
    return f"arguments of run {run_id!r}, step {key}"


def check_keywords(kwargs: dict[str, Any], key: str, run_id: str | None = None) -> None:
    """Refuse a keyword argument named ``*``: the ledger records positional
    arguments under that name, so two different calls would share one
    identity (S5).

    The engine applies it to every call a context makes
    (:meth:`~.engine.Engine.call_from`), in memory too: a program that runs
    in memory must not fail once it is given a store; and again where a
    step's identity is made, for units of work that do not enter through a
    context's call. The error names step ``key`` and, when given, run
    ``run_id``.
    """
    if "*" in kwargs:
        raise SerializationError(
            f"{arguments_of(key, run_id)}: a keyword argument may not be named '*' "
            "(the ledger records positional arguments under that name)"
        )


def args_for_record(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Arguments as recorded: offered options by name, since policies are code."""

    def tidy(v: Any) -> Any:
        if isinstance(v, Policy):
            return f"<policy {v.name}>"
        if isinstance(v, list | tuple) and v and all(is_option(x) for x in v):
            return [f"<policy {as_policy(x).name}>" for x in v]
        return v

    out: dict[str, Any] = {}
    if args:
        out["*"] = [tidy(a) for a in args]
    for k, v in kwargs.items():
        if k == OPTIONS and isinstance(v, list | tuple):
            option_policies(v)  # a clear error for anything that is not an option
            out[k] = [f"<policy {as_policy(x).name}>" for x in v]
        else:
            out[k] = tidy(v)
    return out


def option_policies(options: Any) -> list[Policy[Any, Any]]:
    """The policies offered as options; a TypeError naming any that is not one."""
    out: dict[str, Policy[Any, Any]] = {}
    for i, opt in enumerate(options or ()):
        if isinstance(opt, str | ToolSpec):
            # The engine resolves names and specs before a step runs
            # (Dispatch.offered): one here was never offered through it.
            named = opt if isinstance(opt, str) else opt.name
            raise TypeError(
                f"options[{i}] names {named!r} but is not a policy: names and tool specs "
                "are resolved when a step is offered them (ctx.call(model, options=[...])); "
                "called any other way, offer the policy itself"
            )
        if not is_option(opt):
            raise TypeError(
                f"options[{i}] is {opt!r} ({type(opt).__name__}), which is not a policy; "
                "offer policies or async functions"
            )
        pol = as_policy(opt)
        other = out.setdefault(pol.name, pol)
        if other is not pol and not same_policy(other, pol):
            raise DuplicatePolicy(
                f"two different options are named {pol.name!r}: {where_defined(other)} and "
                f"{where_defined(pol)}; a model could not tell them apart"
            )
    return list(out.values())


def identity_json(
    args: tuple[Any, ...], kwargs: dict[str, Any], key: str, run_id: str | None = None
) -> str:
    """The arguments as recorded and compared on replay (S5); errors name
    step ``key`` and, when given, run ``run_id``.

    Message ids are left out: they are random per execution, so a history
    rebuilt on replay (``Message.user(question)`` inside a policy) would never
    match its record otherwise. What a message says is compared; its id is not.
    """
    check_keywords(kwargs, key, run_id)
    if all(type(v) in SCALARS for v in args) and all(
        type(v) in SCALARS for v in kwargs.values()
    ):  # the common case: plain arguments give the same bytes without the tree walk
        return scalars_json(args, kwargs, key, run_id)
    return record_json(args_for_record(args, kwargs), arguments_of(key, run_id))


def scalars_json(
    args: tuple[Any, ...], kwargs: dict[str, Any], key: str, run_id: str | None = None
) -> str:
    """Plain arguments' JSON. The error's words
    (:func:`arguments_of`) are made only when there
    is an error, so good values pay nothing for them."""
    out: dict[str, Any] = {"*": list(args)} if args else {}
    out.update(kwargs)
    try:
        text = json.dumps(out, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise SerializationError(f"{arguments_of(key, run_id)}: {exc}") from exc
    if "\\" in text:  # an escape, maybe of a lone surrogate: the codec decides
        codec.check_json(text, out, arguments_of(key, run_id))
    return text


def record_json(record: dict[str, Any], where: str) -> str:
    """Arguments as :func:`args_for_record` gives them, as JSON; ``where``
    names them in errors (:func:`arguments_of`)."""
    tree = strip_ids(codec.encode(record, where))
    try:
        text = json.dumps(tree, separators=(",", ":"), allow_nan=False)
        return codec.check_json(text, record, where)
    except ValueError as exc:
        raise SerializationError(f"{where}: {exc}") from exc


def strip_ids(tree: Any) -> Any:
    if isinstance(tree, list):
        return [strip_ids(v) for v in tree]
    if isinstance(tree, dict):
        if tree.get("$t") == "msg":
            inner = {k: strip_ids(v) for k, v in tree["v"].items() if k != "id"}
            return {"$t": "msg", "v": inner}
        return {k: strip_ids(v) for k, v in tree.items()}
    return tree


def is_option(x: Any) -> bool:
    return isinstance(x, Policy) or (callable(x) and not isinstance(x, type | Message))


def step_hash(text: str) -> str:
    """The identity hash of arguments recorded as ``text`` (whole JSON)."""
    return args_digest(text)
