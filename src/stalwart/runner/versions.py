"""A policy's code version: a digest of what decides the steps its runs record.

Every run records the version of the policy that started it
(``RunRecord.code_version``), so an operator can tell which code a run was
started on. The version covers what decides the run's steps:

* a function's source, and the versions of the policies it calls by name
  (a module-level policy, an agent, a flow it names) or holds in a closure;
* an object that says what decides its steps (``__stalwart_version__``,
  returning parts: text, numbers, or objects whose versions count):
  an ``llm.Agent`` names its model, instructions, tools, output type,
  limits, guardrails and handoffs; a provider its model and parameters;
* any other callable object, its class's source.

Stable across processes and machines: made of source text, names and
values, never of ``id()``, addresses or the order of a set. What it does not
see: code a policy reaches through anything but a name or a closure (a tool
looked up in a dict at run time, a helper in another module called through
an attribute), data files, and a model changed on the provider's side. Give
the runner a version of your own (``Runner(code_version="2026-11-28")``,
``stalwart worker --version``) to name a deploy yourself.
"""

from __future__ import annotations

import hashlib
import inspect
import types
from collections.abc import Iterable
from typing import Any

from ..core.policy import Policy, declared_policy

__all__ = ["code_version"]

_PLAIN = (str, int, float, bool, type(None), bytes)


def code_version(pol: Policy[Any, Any]) -> str:
    """``pol``'s version: 12 hex digits, cached on the policy."""
    cached = pol.__dict__.get("_code_version")
    if cached is None:
        digest = hashlib.blake2b(digest_size=6)
        _Parts(digest).policy(pol)
        cached = digest.hexdigest()
        pol.__dict__["_code_version"] = cached
    return str(cached)


class _Parts:
    """Feeds what decides a policy's steps into a digest, each object once."""

    def __init__(self, digest: Any) -> None:
        self.digest = digest
        self.seen: set[int] = set()  # guards cycles only: never part of the digest

    def text(self, value: str) -> None:
        data = value.encode("utf-8", "surrogatepass")
        self.digest.update(len(data).to_bytes(8, "big") + data)

    def policy(self, pol: Policy[Any, Any]) -> None:
        self.text(f"policy {pol.name}")
        self.obj(pol.fn)

    def obj(self, value: Any) -> None:
        if isinstance(value, _PLAIN):
            self.text(repr(value))
            return
        if id(value) in self.seen:
            self.text("(again)")
            return
        self.seen.add(id(value))
        if isinstance(value, Policy):
            self.policy(value)
            return
        own = getattr(type(value), "__stalwart_version__", None)
        if own is not None and not isinstance(value, type):
            self.text(f"parts of {_qualname(type(value))}")
            for part in own(value):
                self.obj(part)
            return
        if isinstance(value, (list, tuple)):
            self.text(f"{type(value).__name__} of {len(value)}")
            for item in value:
                self.obj(item)
            return
        if isinstance(value, (types.FunctionType, types.MethodType)):
            self.function(value)
            return
        if isinstance(value, type):
            self.text(f"class {_qualname(value)}")
            self.text(_source(value))
            return
        carried = getattr(value, "__stalwart_policy__", None)
        if isinstance(carried, Policy):
            if carried.fn is not value:
                self.policy(carried)
                return
            self.text(f"policy {carried.name}")  # an object that is its own policy's body
        named = getattr(value, "name", None)  # the policy name a callable object is run as
        self.text(
            f"object {named!r} of {_qualname(type(value))}"
            if isinstance(named, str)
            else f"object of {_qualname(type(value))}"
        )
        self.text(_source(type(value)))

    def function(self, fn: types.FunctionType | types.MethodType) -> None:
        func = fn.__func__ if isinstance(fn, types.MethodType) else fn
        if not isinstance(func, types.FunctionType):  # a method of a builtin
            self.text(_qualname(func))
            return
        self.text(f"function {_qualname(func)}")
        self.text(_source(func))
        for value in _referenced(func):
            self.obj(value)


def _referenced(func: types.FunctionType) -> Iterable[Any]:
    """The policies (and what carries one: agents, flows) ``func`` names as
    globals or holds in its closure, in the order its code names them."""
    found: list[Any] = []
    names: list[str] = []
    codes = [func.__code__]
    while codes:
        code = codes.pop(0)
        names += code.co_names
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    globs = func.__globals__
    for name in dict.fromkeys(names):
        value = globs.get(name)
        if declared_policy(value) is not None:
            found.append(value)
    for cell in func.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if declared_policy(value) is not None:
            found.append(value)
    return found


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):  # defined in a REPL or built in: its name must do
        return _qualname(obj)


def _qualname(obj: Any) -> str:
    """``obj``'s qualified name; its module's too only where no Python source
    names it (a builtin, an extension type). A module's name is where the
    code was imported from, not what it does: one file is ``__main__`` run
    as a script (``python app.py``) and ``app`` imported by a worker, and
    both must give a run's policy one version."""
    name = getattr(obj, "__qualname__", type(obj).__name__)
    try:
        has_source = inspect.getsourcefile(obj) is not None
    except (OSError, TypeError):  # built in, or made where no file holds it
        has_source = False
    return str(name) if has_source else f"{getattr(obj, '__module__', '?')}.{name}"
