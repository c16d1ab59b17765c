"""``--app``: where the policies a run may execute under come from.

A run row names its policy by name only. A command that executes runs
(``runs resume``, ``worker``) is given the application's policies by the user,
as a module, a file or ``module:attr``, and looks the row's name up among
them. Nothing read from the store is imported (S13): a run naming a policy
the application did not provide is refused.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..core.errors import CLIError

if TYPE_CHECKING:
    from ..core.ledger import RunRecord
    from ..core.policy import Policy
    from ..runner import Runner

__all__ = ["AppOption", "app_policies", "load_app", "policy_for"]

AppOption = Annotated[
    str,
    typer.Option(
        "--app",
        metavar="MODULE",
        help=(
            "Your policies: a module or .py file (every policy in it), or module:attr "
            "(a policy, a list or dict of them, or a Context subclass)."
        ),
    ),
]


def _import_app(module: str) -> ModuleType:
    """Import ``package.module``, or a file ``path/to/agents.py`` (its folder joins the path)."""
    if module.endswith(".py") or os.sep in module:
        path = Path(module)
        if not path.is_file():
            raise CLIError(f"cannot import the app {module!r}: no such file")
        folder = str(path.resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module = path.stem
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `--app myproject.agents` from the project root
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise CLIError(f"cannot import the app module {module!r}: {exc}") from None
    except Exception as exc:
        raise CLIError(
            f"importing the app module {module!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def load_app(spec: str) -> Any:
    """What ``--app`` names, as it is: the module, or its attribute ``attr``
    (``module:attr``), for commands that read marks on it (``mcp serve``)."""
    module, _, attr = spec.partition(":")
    mod = _import_app(module)
    if not attr:
        return mod
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise CLIError(f"the app module {module!r} has no attribute {attr!r}") from None


def app_policies(spec: str) -> list[Policy[Any, Any]]:
    """The policies ``--app`` names: the only ones a run may be resumed under (S13).

    ``module`` gives every policy defined or imported at its top level (and
    those of its Context subclasses); ``module:attr`` gives what ``attr``
    holds. The store never adds to this list: a run row naming a policy
    that is not here is refused, not imported.
    """
    from ..core.policy import as_policy

    module, _, attr = spec.partition(":")
    mod = _import_app(module)
    if not attr:
        found = _unique(p for value in vars(mod).values() for p in _policies_in(value))
        return found + _class_policies(vars(mod).values(), {p.name for p in found})
    try:
        target = getattr(mod, attr)
    except AttributeError:
        raise CLIError(f"the app module {module!r} has no attribute {attr!r}") from None
    found = _policies_in(target, nested=True)
    if not found and callable(target) and not isinstance(target, type):
        found = [as_policy(target)]  # a plain async function, named on purpose
    if not found:
        raise CLIError(f"--app {spec!r} holds no policy")
    return _unique(found)


def _policies_in(value: Any, *, nested: bool = False) -> list[Policy[Any, Any]]:
    """The policies ``value`` is or holds: a policy (or an object that carries
    one, like a model or an agent), an application Context subclass, and, when
    ``nested``, the items of a list, tuple, set or dict."""
    from ..core.context import Context
    from ..core.policy import declared_policy

    found = declared_policy(value)
    if found is not None:
        return [found]
    if isinstance(value, type):
        if not issubclass(value, Context) or value is Context:
            return []
        own = [k for k in value.__mro__ if issubclass(k, Context) and k is not Context]
        return [p for klass in own for v in vars(klass).values() for p in _policies_in(v)]
    if nested and isinstance(value, dict):
        value = list(value.values())
    if nested and isinstance(value, list | tuple | set | frozenset):
        return [p for v in value for p in _policies_in(v, nested=True)]
    return []


def _class_policies(values: Iterable[Any], taken: set[str]) -> list[Policy[Any, Any]]:
    """The class policies a module holds undecorated: objects whose class
    has an async ``__call__`` (``greeter = Greeter()``, run as
    ``runner.run(greeter, ...)``), named as the runner names them.

    Only names no other policy of the module has, and only when one object
    has the name: two undecorated objects of one class would be two
    policies under one name, and guessing which one a run meant is not
    ours to do (``--app module:attr`` says).
    """
    import inspect

    from ..core.policy import Policy, as_policy

    found: dict[str, list[Any]] = {}
    for value in values:
        if isinstance(value, type | Policy) or inspect.isroutine(value) or inspect.ismodule(value):
            continue
        call = getattr(type(value), "__call__", None)  # noqa: B004 - the class's, not the object's
        if call is None or not inspect.iscoroutinefunction(call):
            continue
        if getattr(value, "__stalwart_policy__", None) is not None:
            continue  # a carrier (an agent, a flow): already found
        name = as_policy(value).name
        if name not in taken:
            found.setdefault(name, []).append(value)
    return [as_policy(objs[0]) for objs in found.values() if len({id(o) for o in objs}) == 1]


def _unique(policies: Iterable[Policy[Any, Any]]) -> list[Policy[Any, Any]]:
    """Each policy once (a module may hold one under two names)."""
    return list({id(p): p for p in policies}.values())


def policy_for(
    runner: Runner, rec: RunRecord, app_spec: str, provided: Iterable[Policy[Any, Any]] = ()
) -> Policy[Any, Any]:
    """The policy ``--app`` gave for this run, looked up by the name the row
    records; ``provided`` (what ``--app`` gave) is named when it is not there."""
    pol = runner.find_policy(rec.policy)  # registered policies only; never an import
    if pol is not None:
        return pol
    if app_spec:
        names = sorted({p.name for p in provided})
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise CLIError(
            f"run {rec.id!r} needs policy {rec.policy!r}, which --app {app_spec!r} did not "
            f"provide (it provides: {shown or 'nothing'}); give the module that defines it, or "
            f"module:attr naming the policy, agent, flow or object (a policy's name is its "
            "function's, an agent's or flow's `name`, a class policy's class in snake_case)"
        )
    raise CLIError(
        f"run {rec.id!r} needs policy {rec.policy!r}: "
        "give the module that defines it with --app MODULE (or MODULE:ATTR, or a file.py)"
    )
