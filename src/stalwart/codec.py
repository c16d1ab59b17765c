"""The JSON boundary every recorded value crosses (S11).

Values are turned into a JSON tree that can be turned back into an equal value:
plain JSON types pass through; tuples, sets, bytes, datetimes, UUIDs, enums,
dataclasses, pydantic models and Messages are tagged with ``"$t"`` so that a
replayed step returns the same type it returned live. Anything else is refused
with a :class:`~stalwart.errors.SerializationError` naming the type, at record
time rather than at recovery time.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import importlib
import json
import uuid
from typing import Any

from .errors import SerializationError

__all__ = ["decode", "dumps", "encode", "loads"]

_TAG = "$t"
_PLAIN = (str, int, float, bool, type(None))
_PLAIN_TYPES = frozenset(_PLAIN)


def _qualname(cls: type, where: str) -> str:
    if "<locals>" in cls.__qualname__:
        raise SerializationError(
            f"{where}: a value of type {cls.__module__}.{cls.__qualname__} cannot be read "
            "back from JSON, because its class is defined inside a function; "
            "define it at module level"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def _import(path: str) -> Any:
    module, _, qual = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def encode(value: Any, where: str = "value") -> Any:
    """Turn ``value`` into a JSON tree; ``where`` names it in errors."""
    if type(value) in _PLAIN_TYPES:
        return value
    if isinstance(value, list):
        try:
            return [encode(v, where) for v in value]
        except SerializationError:
            _locate(value, enumerate(value), where)
            raise
    if isinstance(value, dict):
        try:
            if all(type(k) is str for k in value):
                tree = {k: encode(v, where) for k, v in value.items()}
                return {_TAG: "dict", "v": tree} if _TAG in value else tree
            return {
                _TAG: "map",
                "v": [[encode(k, where), encode(v, where)] for k, v in value.items()],
            }
        except SerializationError:
            _locate(value, value.items(), where)
            raise
    return _encode_other(value, where)


def _locate(container: Any, items: Any, where: str) -> None:
    """Name the key or index at fault: ``inputs of run r: ['shared']['q']: ...``.

    Only runs on failure, so encoding good values pays nothing for it.
    """
    for k, v in items:
        try:
            encode(v, where)
        except SerializationError as exc:
            message = str(exc)
            head, sep, rest = message.partition(": ")
            if head.startswith(where) and sep:  # outer keys go first
                exc.args = (f"{where}[{k!r}]{head[len(where) :]}: {rest}",)
            raise exc from None


def _encode_other(value: Any, where: str) -> Any:
    from .message import Message

    if isinstance(value, Message):
        return {_TAG: "msg", "v": value.to_dict()}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {_TAG: "tuple", "v": [encode(v, where) for v in value]}
    if isinstance(value, frozenset):
        return {_TAG: "frozenset", "v": [encode(v, where) for v in value]}
    if isinstance(value, set):
        return {_TAG: "set", "v": [encode(v, where) for v in value]}
    if isinstance(value, bytes):
        return {_TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if isinstance(value, _dt.datetime):
        return {_TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, _dt.date):
        return {_TAG: "date", "v": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {_TAG: "uuid", "v": str(value)}
    if isinstance(value, enum.Enum):
        return {_TAG: "enum", "c": _qualname(type(value), where), "v": encode(value.value, where)}
    if isinstance(value, _PLAIN):  # a subclass of str, int or float that is no enum
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: encode(getattr(value, f.name), where)
            for f in dataclasses.fields(value)
            if f.init
        }
        return {_TAG: "dc", "c": _qualname(type(value), where), "v": fields}
    model_dump = getattr(value, "model_dump", None)
    if model_dump is not None and hasattr(type(value), "model_validate"):
        try:
            dumped = model_dump(mode="json")
        except Exception as exc:  # pydantic raises its own types here
            raise SerializationError(
                f"{where}: {type(value).__qualname__} cannot be serialized to JSON: {exc}"
            ) from exc
        return {_TAG: "model", "c": _qualname(type(value), where), "v": dumped}
    raise SerializationError(
        f"{where}: a value of type {type(value).__module__}.{type(value).__qualname__} "
        "cannot be recorded as JSON (use JSON types, dataclasses, pydantic models or Messages)"
    )


def decode(tree: Any) -> Any:
    """Rebuild the value that :func:`encode` turned into ``tree``."""
    if isinstance(tree, list):
        return [decode(v) for v in tree]
    if isinstance(tree, dict):
        tag = tree.get(_TAG)
        if tag is None:
            return {k: decode(v) for k, v in tree.items()}
        return _decode_tagged(tag, tree)
    return tree


def _decode_tagged(tag: str, tree: dict[str, Any]) -> Any:
    v = tree["v"]
    if tag == "dict":
        return {k: decode(x) for k, x in v.items()}
    if tag == "map":
        return {decode(k): decode(x) for k, x in v}
    if tag == "msg":
        from .message import Message

        return Message.from_dict(v)
    if tag == "tuple":
        return tuple(decode(x) for x in v)
    if tag == "set":
        return {decode(x) for x in v}
    if tag == "frozenset":
        return frozenset(decode(x) for x in v)
    if tag == "bytes":
        return base64.b64decode(v)
    if tag == "datetime":
        return _dt.datetime.fromisoformat(v)
    if tag == "date":
        return _dt.date.fromisoformat(v)
    if tag == "uuid":
        return uuid.UUID(v)
    if tag == "enum":
        return _import(tree["c"])(decode(v))
    if tag == "dc":
        return _import(tree["c"])(**{k: decode(x) for k, x in v.items()})
    if tag == "model":
        return _import(tree["c"]).model_validate(v)
    raise SerializationError(f"unknown tag {tag!r} in recorded value")


def dumps(value: Any, where: str = "value") -> str:
    """Serialize ``value`` to compact JSON text."""
    try:
        if type(value) in _PLAIN_TYPES:  # the common case: skip the tree walk
            return json.dumps(value, allow_nan=False)
        return json.dumps(encode(value, where), separators=(",", ":"), allow_nan=False)
    except ValueError as exc:  # NaN or infinity: not JSON
        raise SerializationError(f"{where}: {exc}") from exc


def loads(text: str | bytes) -> Any:
    """Parse JSON text written by :func:`dumps` back into a value."""
    return decode(json.loads(text))
