"""Errors and outcomes as the ledger keeps them, and read back without
importing anything (S4, S10, S13)."""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
from typing import Any

from . import codec, errors
from .declared import lookup
from .errors import (
    CancelledRun,
    CorruptedRecord,
    StaleLeaseError,
    StalwartError,
    StepError,
    StoreUnavailable,
)
from .sealed import SEALED_PREFIX, sealed_error

_log = logging.getLogger("stalwart.engine")

__all__ = [
    "ERRORS_WIRE_MODULE",
    "error_from_json",
    "error_to_json",
    "is_plain",
    "recorded_outcome",
    "warn_rebuilt",
]

_WARNED: set[type] = set()


def warn_rebuilt(original: type, rebuilt: type) -> None:
    """Say once per class that its errors are raised as another type."""
    if original in _WARNED or issubclass(original, StepError):
        return
    _WARNED.add(original)
    _log.warning(
        "%s is not declared, so a step's %s is raised as %s, live as on replay; "
        "declare it with stalwart.register_type(%s) to raise it as itself",
        _type_name(original),
        original.__name__,
        rebuilt.__name__,
        original.__name__,
    )


def error_to_json(exc: BaseException) -> str:
    """A failure as recorded: its type's name, its message, and its args and
    attributes when they are plain JSON (no codec tags), so that reading an
    error back never constructs anything but the exception itself."""
    cls = type(exc)
    if isinstance(exc, StepError):
        data: dict[str, Any] = {"type": exc.error_type, "message": exc.error_message}
    else:
        data = {"type": _type_name(cls), "message": str(exc)}
        bases = [_type_name(c) for c in cls.__mro__[1:] if issubclass(c, Exception)]
        if bases[:-1]:  # the classes between it and Exception, nearest first
            data["bases"] = bases[:-1][:8]
        if is_plain(list(exc.args)):
            data["args"] = list(exc.args)
        attrs = {
            k: v
            for k, v in getattr(exc, "__dict__", {}).items()
            if k.isidentifier() and not k.startswith("_") and is_plain(v)
        }
        if isinstance(exc, OSError):  # kept in C slots, not __dict__
            attrs.update({k: v for k in ("filename", "filename2") if (v := getattr(exc, k))})
        if attrs:
            data["attrs"] = attrs
    # A message may hold a lone surrogate (a file name decoded with
    # surrogateescape): recorded escaped, so every surface can show it.
    return codec.escaped_json(json.dumps(data, separators=(",", ":")), data)


# The name Stalwart's own errors carry in a ledger: stable data, independent
# of the module that defines them (rows written before core/ existed say so).
ERRORS_WIRE_MODULE = "stalwart.errors"


def _type_name(cls: type) -> str:
    module = ERRORS_WIRE_MODULE if cls.__module__ == errors.__name__ else cls.__module__
    return f"{module}.{cls.__qualname__}"


def is_plain(value: Any, depth: int = 0) -> bool:
    """Plain JSON data: no codec tags needed, nothing to construct."""
    if type(value) in SCALARS:
        return not (type(value) is float and value - value != 0.0)
    if depth > 20:
        return False
    if type(value) is list:
        return all(is_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and is_plain(v, depth + 1) for k, v in value.items())
    return False


def recorded_outcome(run_id: str, status: str, result: str | None, error: str | None) -> Any:
    """A finished run's value, or its recorded error raised (S10)."""
    if status == "succeeded":
        return codec.loads(result or "null", f"result of run {run_id!r}")
    if status == "cancelled":
        raise CancelledRun(f"run {run_id!r} was cancelled")
    raise error_from_json(
        error or '{"type":"Error","message":"failed"}', f"error of run {run_id!r}"
    )


def error_from_json(text: str, where: str = "recorded error") -> Exception:
    """Rebuild a recorded error without importing anything (S13).

    The original class comes back, with its recorded args and attributes,
    when it is a builtin exception, one of Stalwart's own that a step may
    raise, or a class the program declared; anything else is a
    :class:`StepError` carrying the recorded type name and message. Never a
    run-level error (a store or nondeterminism error), which an edited
    row could otherwise use to make every worker retry the run for ever.

    An error encrypted at rest that no key opened, or erased, raises
    :class:`~stalwart.core.errors.ValueEncrypted` or
    :class:`~stalwart.core.errors.ValueErased` naming ``where``: it is not
    the step's error, and replaying it as one would be garbage.
    """
    if text.startswith(SEALED_PREFIX):
        raise sealed_error(text, where)
    try:
        data = json.loads(text)
        type_name = data["type"]
        message = data["message"]
        args = data.get("args")
        attrs = data.get("attrs", {})
        bases = data.get("bases", [])
        if not isinstance(type_name, str) or not isinstance(message, str):
            raise TypeError("type and message must be strings")
        if not (isinstance(bases, list) and all(isinstance(b, str) for b in bases)):
            raise TypeError("bases must be a list of type names")
        if args is not None and not (isinstance(args, list) and is_plain(args)):
            raise TypeError("args must be a list of plain values")
        if not (isinstance(attrs, dict) and is_plain(attrs)):
            raise TypeError("attrs must be an object of plain values")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise CorruptedRecord(
            f"{where}: the recorded error cannot be read back ({type(exc).__name__}: {exc})"
        ) from None
    # The class itself if known, else its nearest known base (a
    # json.JSONDecodeError the program never declared is still a ValueError).
    for name in (type_name, *bases[:8]):
        cls = _known_exception(name)
        if cls is None:
            continue
        with contextlib.suppress(Exception):
            exc_obj = _rebuild(cls, tuple(args) if args is not None else (message,), attrs)
            if str(exc_obj) == message or isinstance(exc_obj, StalwartError):
                return exc_obj
    return StepError(type_name.rpartition(".")[2] or type_name, message)


def _rebuild(cls: type[Exception], args: tuple[Any, ...], attrs: dict[str, Any]) -> Exception:
    if cls.__module__ == "builtins":
        exc = cls(*args)  # builtins set their C fields (errno, filename...) from args
    else:
        exc = cls.__new__(cls)  # the program's class: its __init__ is not replayed
        exc.args = args
    for name, value in attrs.items():
        if name.isidentifier() and not name.startswith("_"):
            setattr(exc, name, value)
    return exc


# Never rebuilt from a row: they would tell a runner to retry the run (so an
# edited row could make every worker spin), or need their own constructor.
_CONTROL = (StoreUnavailable, StaleLeaseError, StepError)


def _known_exception(type_name: str) -> type[Exception] | None:
    """The exception class a recorded type name stands for, if the program knows it."""
    module, _, qual = type_name.rpartition(".")
    cls: Any
    if module == "builtins":
        cls = getattr(builtins, qual, None)
    elif module == ERRORS_WIRE_MODULE:
        cls = getattr(errors, qual, None) if qual in errors.__all__ else None
    else:
        cls = lookup(f"{module}:{qual}")
        if cls is None and "." in module:  # a nested class: Outer.Inner
            head, _, outer = module.rpartition(".")
            cls = lookup(f"{head}:{outer}.{qual}")
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, _CONTROL):
        return cls
    return None


SCALARS = frozenset({str, int, float, bool, type(None)})
