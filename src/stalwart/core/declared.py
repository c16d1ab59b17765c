"""The application types a recorded value may be rebuilt as (S13).

A ledger row is data: whoever can edit it must not be able to make a process
import a module or call a constructor. So the codec never imports the class a
row names; it looks the name up here, and only finds the classes the program
itself declared: the types in its policies' hints (parameters and return, and
the fields of those types, recursively), the exception types a policy retries
on, and whatever it registers with :func:`register_type`.

Declaring is idempotent and cheap to repeat; hints are read lazily (the first
time a policy's value is recorded or read back), because at decoration time
a forward reference may name a class defined further down the module.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import typing
from typing import Any

__all__ = [
    "declare_annotation",
    "declare_hints",
    "is_declared",
    "lookup",
    "name_of",
    "register_type",
]

_TYPES: dict[str, type] = {}
_LOCK = threading.Lock()


def _stdlib_errors() -> None:
    """Standard exceptions steps commonly raise, declared for every program:
    the standard library's classes are not data an attacker chose."""
    import json
    import subprocess

    for cls in (json.JSONDecodeError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        _TYPES[name_of(cls)] = cls


def name_of(cls: type) -> str:
    """The name a recorded value carries for its class: ``module:qualname``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def register_type(*classes: type) -> None:
    """Allow values of these classes to be read back from a ledger.

    Needed for dataclasses, enums, pydantic models and exception types that
    no policy's type hints mention (a tool returning ``Any``, a flow's shared
    store, a custom error a replay should raise as itself). The fields of a
    registered dataclass or model are declared with it.
    """
    for cls in classes:
        if not isinstance(cls, type):
            raise TypeError(f"register_type() takes classes, not {cls!r}")
        _declare(cls)


def lookup(name: str) -> type | None:
    """The declared class recorded as ``name``, or None: never an import."""
    return _TYPES.get(name)


def is_declared(cls: type) -> bool:
    return _TYPES.get(name_of(cls)) is cls


def declare_hints(fn: Any) -> None:
    """Declare the types named in ``fn``'s annotations (parameters and return)."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # an unresolvable forward reference: take what is resolved
        raw = getattr(fn, "__annotations__", {})
        hints = {k: v for k, v in raw.items() if not isinstance(v, str)}
    for ann in hints.values():
        _walk(ann)


def declare_annotation(ann: Any) -> None:
    """Declare the classes inside a type annotation (``list[Report] | None``)."""
    _walk(ann)


def _walk(ann: Any) -> None:
    # No memo of walked annotations: they are often built afresh (string
    # hints), and an id() memo would skip a new one at a reused address.
    # A declared class stops the walk, which bounds recursive types.
    if isinstance(ann, type):
        _declare(ann)
    for arg in typing.get_args(ann):
        _walk(arg)


def _declare(cls: type) -> None:
    if not _is_rebuildable(cls):
        return
    name = name_of(cls)
    if _TYPES.get(name) is cls:
        return
    with _LOCK:
        _TYPES[name] = cls
    if dataclasses.is_dataclass(cls):
        # The codec tags a dataclass's fields one by one, so their types are
        # read back by name too. (A pydantic model rebuilds its own fields.)
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception:
            hints = {}
        for ann in hints.values():
            _walk(ann)


def _is_rebuildable(cls: type) -> bool:
    """Classes the codec tags by name; anything else needs no declaring."""
    if cls.__module__ == "builtins" or "<locals>" in cls.__qualname__:
        return False
    return (
        issubclass(cls, enum.Enum | BaseException)
        or dataclasses.is_dataclass(cls)
        or hasattr(cls, "model_validate")
    )


_stdlib_errors()
