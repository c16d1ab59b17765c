"""The JSON boundary every recorded value crosses (S11).

Values are turned into a JSON tree that can be turned back into an equal value:
plain JSON types pass through; tuples, sets, bytes, datetimes, UUIDs, enums,
dataclasses, pydantic models and Messages are tagged with ``"$t"`` so that a
replayed step returns the same type it returned live. Anything else is refused
with a :class:`~stalwart.core.errors.SerializationError` naming the type, at record
time rather than at recovery time.

Text UTF-8 cannot encode is refused the same way: a lone surrogate (JSON
``"\\ud800"``, which Python's ``json.loads`` accepts) is half of a UTF-16
pair, not a character, and every surface that shows a recorded value (the
API, the inspector, the CLI, PostgreSQL) writes UTF-8. :func:`dumps` refuses
it naming where it sits (``inputs of run 'r'['shared']['q']: the text holds
U+D800 ...``), so no store holds text some surface cannot show. The check
reads the JSON text once for an escaped surrogate (``\\ud``), which only text
holding one, or a character beyond U+FFFF (an emoji), has; the value's path
is looked for only when one is lone.

Reading back never imports anything (S13): a tagged class is looked up among
the types the program declared (:mod:`stalwart.core.declared`), and a class is
only recorded if it is declared, so what was written can always be read back
by the same program. A row that names anything else, or that is not what
this module writes, raises :class:`~stalwart.core.errors.CorruptedRecord` naming
where it was found.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import json
import re
import types
import uuid
from collections.abc import Callable
from typing import Any

from .declared import is_declared, lookup, name_of
from .errors import CorruptedRecord, SerializationError
from .sealed import sealed_error, sealed_state

__all__ = [
    "check_json",
    "decode",
    "dumps",
    "encode",
    "escaped_json",
    "loads",
    "register_codec",
    "registered_codec",
]

_TAG = "$t"

# The core's own tagged types (a Message): its tag, and how it becomes plain
# data and back. The module that defines the type registers it, so the codec
# imports none of them.
_CORE_TYPES: dict[str, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {}


def register_core_type(
    cls: type, tag: str, to_data: Callable[[Any], Any], from_data: Callable[[Any], Any]
) -> None:
    """Encode values of ``cls`` as ``{"$t": tag, "v": to_data(value)}``,
    read back with ``from_data``. For the core's own types (a :class:`Message`)."""
    _CORE_TYPES[tag] = (cls, to_data, from_data)


_PLAIN = (str, int, float, bool, type(None))
_PLAIN_TYPES = frozenset(_PLAIN)


class _Codec:
    """A program's codec for one class: its name in the ledger, and both ways."""

    __slots__ = ("cls", "from_data", "name", "to_data")

    def __init__(
        self, cls: type, name: str, to_data: Callable[[Any], Any], from_data: Callable[[Any], Any]
    ) -> None:
        self.cls = cls
        self.name = name
        self.to_data = to_data
        self.from_data = from_data


# The codecs the program registered, by class and by the name rows carry.
_CODECS: dict[type, _Codec] = {}
_CODEC_NAMES: dict[str, _Codec] = {}
# Types the codec handles itself: a codec for one would never be asked.
_BUILTIN = (*_PLAIN, list, dict, tuple, set, frozenset, bytes, _dt.date, uuid.UUID)
_CODEC_NAME = re.compile(r"^[A-Za-z0-9_.:<>-]{1,200}$")


def register_codec(
    cls: type,
    to_data: Callable[[Any], Any],
    from_data: Callable[[Any], Any],
    *,
    name: str | None = None,
) -> None:
    """Record values of ``cls`` as ``to_data(value)`` and read them back with ``from_data``.

    ``to_data`` returns anything the ledger records (JSON types, ``bytes``,
    the types the codec knows); ``from_data`` gets that back and returns the
    value. A row names the codec by ``name`` (default ``module:qualname`` of
    ``cls``), and reading one back looks the name up among the codecs this
    program registered: a row naming any other is a
    :class:`~stalwart.core.errors.CorruptedRecord`, and nothing is imported.
    A subclass of ``cls`` is recorded by the codec of its nearest registered
    base. Registering the same class again replaces its codec.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_codec() takes a class, not {cls!r}")
    if issubclass(cls, _BUILTIN) or any(issubclass(cls, c) for c, *_ in _CORE_TYPES.values()):
        raise ValueError(
            f"register_codec({cls.__qualname__}): the ledger records {cls.__qualname__} "
            "values itself; a codec is for types it cannot record"
        )
    if not callable(to_data) or not callable(from_data):
        raise TypeError(f"register_codec({cls.__qualname__}): to_data and from_data are functions")
    label = name if name is not None else name_of(cls)
    if not isinstance(label, str) or not _CODEC_NAME.match(label):
        raise ValueError(
            f"register_codec({cls.__qualname__}): the name {label!r} must be 1 to 200 letters, "
            "digits or any of _ . : < > -"
        )
    taken = _CODEC_NAMES.get(label)
    if taken is not None and taken.cls is not cls:
        raise ValueError(
            f"register_codec({cls.__qualname__}): the name {label!r} is the codec of "
            f"{taken.cls.__module__}.{taken.cls.__qualname__}; give another name="
        )
    old = _CODECS.get(cls)
    if old is not None:
        del _CODEC_NAMES[old.name]
    codec = _Codec(cls, label, to_data, from_data)
    _CODECS[cls] = codec
    _CODEC_NAMES[label] = codec


def registered_codec(cls: type) -> str | None:
    """The name ``cls``'s values are recorded under by a registered codec, or None."""
    codec = _codec_for(cls)
    return None if codec is None else codec.name


def _codec_for(cls: type) -> _Codec | None:
    codec = _CODECS.get(cls)
    if codec is None:
        for base in cls.__mro__[1:]:
            codec = _CODECS.get(base)
            if codec is not None:
                break
    return codec


def _by_codec(codec: _Codec, value: Any, where: str, strict: bool) -> Any:
    try:
        data = codec.to_data(value)
    except SerializationError as exc:
        raise SerializationError(f"{where}: {exc}") from None
    except Exception as exc:
        raise SerializationError(
            f"{where}: the codec {codec.name!r} could not record a "
            f"{type(value).__qualname__} ({type(exc).__name__}: {exc})"
        ) from exc
    if type(data) is codec.cls or (_codec_for(type(data)) is codec):
        raise SerializationError(
            f"{where}: the codec {codec.name!r} returned a {type(data).__qualname__} again; "
            "to_data must return data the ledger records (JSON types, bytes)"
        )
    return {
        _TAG: "codec",
        "c": codec.name,
        "v": _enc(data, f"{where} (codec {codec.name})", strict),
    }


def _qualname(cls: type, where: str, strict: bool) -> str:
    if "<locals>" in cls.__qualname__:
        raise SerializationError(
            f"{where}: a value of type {cls.__module__}.{cls.__qualname__} cannot be read "
            "back from JSON, because its class is defined inside a function; "
            "define it at module level"
        )
    if strict and not is_declared(cls):
        raise SerializationError(
            f"{where}: a value of type {cls.__module__}.{cls.__qualname__} cannot be recorded, "
            "because nothing declares it may be read back: name it in the policy's type hints "
            f"or call stalwart.register_type({cls.__qualname__})"
        )
    return name_of(cls)


def encode(value: Any, where: str = "value", *, strict: bool = True) -> Any:
    """Turn ``value`` into a JSON tree; ``where`` names it in errors.

    ``strict`` (the default for anything recorded) refuses classes the program
    has not declared; a tree only shown to a model may skip that check.
    """
    try:
        return _enc(value, where, strict)
    except RecursionError:
        raise SerializationError(
            f"{where}: the value is nested too deeply to record, or contains itself"
        ) from None


def _enc(value: Any, where: str, strict: bool) -> Any:
    t = type(value)
    if t in _PLAIN_TYPES:
        if t is float and value - value != 0.0:  # NaN or infinity
            raise SerializationError(f"{where}: {value} is not a JSON number")
        return value
    if isinstance(value, list):
        try:
            return [_enc(v, where, strict) for v in value]
        except SerializationError:
            _locate(value, enumerate(value), where, strict)
            raise
    if isinstance(value, dict):
        try:
            if all(type(k) is str for k in value):
                tree = {k: _enc(v, where, strict) for k, v in value.items()}
                return {_TAG: "dict", "v": tree} if _TAG in value else tree
            return {
                _TAG: "map",
                "v": [[_enc(k, where, strict), _enc(v, where, strict)] for k, v in value.items()],
            }
        except SerializationError:
            _locate(value, value.items(), where, strict)
            raise
    return _encode_other(value, where, strict)


def _locate(container: Any, items: Any, where: str, strict: bool) -> None:
    """Name the key or index at fault: ``inputs of run r: ['shared']['q']: ...``.

    Only runs on failure, so encoding good values pays nothing for it.
    """
    for k, v in items:
        try:
            _enc(v, where, strict)
        except SerializationError as exc:
            message = str(exc)
            head, sep, rest = message.partition(": ")
            if head.startswith(where) and sep:  # outer keys go first
                exc.args = (f"{where}[{k!r}]{head[len(where) :]}: {rest}",)
            raise exc from None


def _encode_other(value: Any, where: str, strict: bool) -> Any:
    for tag, (core_type, to_data, _) in _CORE_TYPES.items():
        if isinstance(value, core_type):
            return {_TAG: tag, "v": to_data(value)}
    if _CODECS:
        codec = _codec_for(type(value))
        if codec is not None:
            return _by_codec(codec, value, where, strict)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {_TAG: "tuple", "v": [_enc(v, where, strict) for v in value]}
    if isinstance(value, frozenset):
        return {_TAG: "frozenset", "v": [_enc(v, where, strict) for v in value]}
    if isinstance(value, set):
        return {_TAG: "set", "v": [_enc(v, where, strict) for v in value]}
    if isinstance(value, bytes):
        return {_TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if isinstance(value, _dt.datetime):
        return {_TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, _dt.date):
        return {_TAG: "date", "v": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {_TAG: "uuid", "v": str(value)}
    if isinstance(value, enum.Enum):
        cls = _qualname(type(value), where, strict)
        return {_TAG: "enum", "c": cls, "v": _enc(value.value, where, strict)}
    if isinstance(value, _PLAIN):  # a subclass of str, int or float that is no enum
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = _qualname(type(value), where, strict)
        fields = {
            f.name: _enc(getattr(value, f.name), where, strict)
            for f in dataclasses.fields(value)
            if f.init
        }
        return {_TAG: "dc", "c": cls, "v": fields}
    model_dump = getattr(value, "model_dump", None)
    if model_dump is not None and hasattr(type(value), "model_validate"):
        try:
            dumped = model_dump(mode="json")
        except Exception as exc:  # pydantic raises its own types here
            raise SerializationError(
                f"{where}: {type(value).__qualname__} cannot be serialized to JSON: {exc}"
            ) from exc
        return {_TAG: "model", "c": _qualname(type(value), where, strict), "v": dumped}
    what = f"{where}: a value of type {type(value).__module__}.{type(value).__qualname__}"
    if _is_live(type(value)):
        raise SerializationError(
            f"{what} cannot be recorded: it is a live object (a queue, a lock, an event, a "
            "connection, a file), not data, and a resumed run could not have it back; "
            "to pass messages between runs, use their mailboxes (ctx.send and ctx.receive), "
            "and keep clients and connections out of what is recorded"
        )
    raise SerializationError(
        f"{what} cannot be recorded as JSON (use JSON types, dataclasses, pydantic models "
        f"or Messages{_codec_hint(type(value))})"
    )


# The types stalwart.codecs records (a subclass too), by top-level package
# and class name, with the name its codec is asked for by.
_SHIPPED = {
    ("numpy", "ndarray"): "numpy",
    ("numpy", "generic"): "numpy",
    ("pandas", "DataFrame"): "pandas",
    ("pandas", "Series"): "pandas",
    ("PIL", "Image"): "pil",
}


# Where live objects come from: a queue, a lock, an event, a connection, a
# file, a process. They are not data whatever codec a program registers.
_LIVE = frozenset(
    {
        "asyncio",
        "queue",
        "threading",
        "multiprocessing",
        "concurrent",
        "socket",
        "ssl",
        "io",
        "_io",
        "sqlite3",
        "subprocess",
        "selectors",
        "_thread",
        "_queue",
        "_asyncio",
    }
)
_LIVE_TYPES = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)


def _is_live(cls: type) -> bool:
    return cls.__module__.partition(".")[0] in _LIVE or issubclass(cls, _LIVE_TYPES)


def _codec_hint(cls: type) -> str:
    for base in cls.__mro__:
        shipped = _SHIPPED.get((base.__module__.partition(".")[0], base.__qualname__))
        if shipped is not None:
            return (
                f", or ask for its codec: stalwart.codecs.use({shipped!r}), "
                f"or stalwart run --codec {shipped}"
            )
    return ", or register a codec for it: stalwart.register_codec"


def decode(tree: Any, where: str = "value") -> Any:
    """Rebuild the value that :func:`encode` turned into ``tree``.

    Raises :class:`CorruptedRecord` naming ``where`` for a tree this module
    did not write, or one naming a class the program has not declared.
    """
    try:
        return _dec(tree)
    except CorruptedRecord as exc:
        raise CorruptedRecord(f"{where}: {exc}") from None
    except RecursionError:
        raise CorruptedRecord(f"{where}: the recorded value is nested too deeply") from None
    except Exception as exc:  # a malformed tree, or a declared class refusing the data
        raise CorruptedRecord(
            f"{where}: the recorded value cannot be read back ({type(exc).__name__}: {exc})"
        ) from exc


def _dec(tree: Any) -> Any:
    if isinstance(tree, list):
        return [_dec(v) for v in tree]
    if isinstance(tree, dict):
        tag = tree.get(_TAG)
        if tag is None:
            return {k: _dec(v) for k, v in tree.items()}
        return _decode_tagged(tag, tree)
    return tree


def _declared(tree: dict[str, Any]) -> Any:
    name = tree["c"]
    cls = lookup(name) if isinstance(name, str) else None
    if cls is None:
        raise CorruptedRecord(
            f"the record names type {str(name)[:200]!r}, which this program has not declared "
            "(declare it in a policy's type hints or with stalwart.register_type); "
            "nothing was imported"
        )
    return cls


def _decode_tagged(tag: str, tree: dict[str, Any]) -> Any:
    v = tree["v"]
    if tag == "dict":
        return {k: _dec(x) for k, x in v.items()}
    if tag == "map":
        return {_dec(k): _dec(x) for k, x in v}
    if tag in _CORE_TYPES:
        return _CORE_TYPES[tag][2](v)
    if tag == "codec":
        name = tree.get("c")
        codec = _CODEC_NAMES.get(name) if isinstance(name, str) else None
        if codec is None:
            raise CorruptedRecord(
                f"the record names codec {str(name)[:200]!r}, which this program has not "
                "registered (stalwart.register_codec); nothing was imported"
            )
        return codec.from_data(_dec(v))
    if tag == "tuple":
        return tuple(_dec(x) for x in v)
    if tag == "set":
        return {_dec(x) for x in v}
    if tag == "frozenset":
        return frozenset(_dec(x) for x in v)
    if tag == "bytes":
        return base64.b64decode(v)
    if tag == "datetime":
        return _dt.datetime.fromisoformat(v)
    if tag == "date":
        return _dt.date.fromisoformat(v)
    if tag == "uuid":
        return uuid.UUID(v)
    if tag == "enum":
        cls = _declared(tree)
        if not issubclass(cls, enum.Enum):
            raise CorruptedRecord(f"{tree['c']!r} is recorded as an enum but is not one")
        return cls(_dec(v))
    if tag == "dc":
        cls = _declared(tree)
        if not dataclasses.is_dataclass(cls):
            raise CorruptedRecord(f"{tree['c']!r} is recorded as a dataclass but is not one")
        build: Any = cls
        return build(**{k: _dec(x) for k, x in v.items()})
    if tag == "model":
        cls = _declared(tree)
        if not hasattr(cls, "model_validate"):
            raise CorruptedRecord(f"{tree['c']!r} is recorded as a model but is not one")
        return cls.model_validate(v)
    raise CorruptedRecord(f"unknown tag {str(tag)[:50]!r} in the recorded value")


def dumps(value: Any, where: str = "value") -> str:
    """Serialize ``value`` to compact JSON text.

    Raises :class:`SerializationError` naming ``where`` (and the path inside
    the value) for what cannot be recorded: a type JSON cannot carry, NaN,
    or text UTF-8 cannot encode (a lone surrogate).
    """
    try:
        if type(value) in _PLAIN_TYPES:  # the common case: skip the tree walk
            text = json.dumps(value, allow_nan=False)
        else:
            text = json.dumps(encode(value, where), separators=(",", ":"), allow_nan=False)
    except ValueError as exc:  # NaN or infinity: not JSON
        raise SerializationError(f"{where}: {exc}") from exc
    except RecursionError:
        raise SerializationError(f"{where}: the value is nested too deeply to record") from None
    # An escaped surrogate: a pair (an emoji) or a lone one. One backslash is
    # looked for first: memchr's speed, where a three-letter search is not.
    if "\\" in text and "\\ud" in text:
        check_json(text, value, where)
    return text


# JSON text written with ``ensure_ascii`` (json.dumps's default), read from its
# start as long as it holds no lone surrogate: runs of plain characters, an
# escape that is no surrogate (an escaped backslash among them, so a
# backslash's parity is kept), or a surrogate pair (a character beyond U+FFFF).
_NO_LONE_SURROGATE = re.compile(
    r"(?:[^\\]++|\\[^u]|\\u(?!d[89a-f])[0-9a-f]{4}"
    r"|\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2})*+"
)


def _lone_surrogate(text: str) -> bool:
    """Whether JSON text written with ``ensure_ascii`` escapes a surrogate
    that is not half of a pair."""
    found = _NO_LONE_SURROGATE.match(text)
    return found is None or found.end() != len(text)


def check_json(text: str, value: Any, where: str = "value") -> str:
    """``text``, the JSON ``json.dumps`` wrote for ``value`` (ASCII, the
    default), if every string in it is text UTF-8 can encode; otherwise
    :class:`SerializationError` naming ``where``, the path to the string
    (a key or a value) and the lone surrogate it holds.

    For code that writes a recorded value's JSON itself (from
    :func:`encode`'s tree) rather than through :func:`dumps`, which checks.
    """
    if "\\" in text and "\\ud" in text and _lone_surrogate(text):
        _find_text(value, where)
        raise SerializationError(  # the value changed since its text was written
            f"{where}: the text holds a lone surrogate, which UTF-8 cannot encode, "
            "so it cannot be recorded"
        )
    return text


def escaped_json(text: str, tree: Any) -> str:
    """``text``, the JSON ``json.dumps`` wrote for ``tree`` (plain JSON data),
    or, when it holds a lone surrogate, that JSON with each one written as
    its escape's text (``\\ud800``, six characters) so it can be shown.

    For what must be recorded even so: a failure's message (a file name
    decoded with ``surrogateescape``) is the run's outcome; a value is
    refused instead (:func:`dumps`).
    """
    if "\\" in text and "\\ud" in text and _lone_surrogate(text):
        return json.dumps(_escaped(tree), separators=(",", ":"))
    return text


def _escaped(tree: Any) -> Any:
    if isinstance(tree, str):
        return tree.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(tree, list):
        return [_escaped(v) for v in tree]
    if isinstance(tree, dict):
        return {_escaped(k): _escaped(v) for k, v in tree.items()}
    return tree


def _check_text(text: str, where: str, what: str = "the text") -> None:
    """Refuse text UTF-8 cannot encode, naming where it is and which code
    point, never the text itself (it may be a secret)."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SerializationError(
            f"{where}: {what} holds U+{ord(text[exc.start]):04X} at index {exc.start}, "
            "a lone surrogate (half of a UTF-16 pair, not a character), which UTF-8 cannot "
            "encode, so it cannot be recorded (decode the source as UTF-8, or pass bytes)"
        ) from None


def _find_text(value: Any, where: str) -> None:
    """Raise for the first string in ``value`` (a key or a value) that UTF-8
    cannot encode, naming its path as :func:`_locate` does; only called once
    the JSON text showed there is one."""
    if isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, dict):
        for k in value:
            if isinstance(k, str):
                _check_text(k, where, f"the key {k!r}")
            else:
                _find_text(k, f"{where}, a key")
        for k, v in value.items():
            _find_text(v, f"{where}[{k!r}]")
    elif isinstance(value, list | tuple | set | frozenset):
        for i, v in enumerate(value):
            _find_text(v, f"{where}[{i}]")
    elif isinstance(value, enum.Enum):
        _find_text(value.value, where)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _find_text(getattr(value, f.name), f"{where}.{f.name}")
    else:
        for _, (core_type, to_data, _) in _CORE_TYPES.items():
            if isinstance(value, core_type):
                _find_text(to_data(value), where)
                return
        model_dump = getattr(value, "model_dump", None)
        if model_dump is not None and hasattr(type(value), "model_validate"):
            for name, field_value in model_dump(mode="python").items():
                _find_text(field_value, f"{where}.{name}")


def loads(text: str | bytes, where: str = "value") -> Any:
    """Parse JSON text written by :func:`dumps` back into a value.

    Raises :class:`CorruptedRecord` naming ``where`` if it is not such text.
    """
    try:
        tree = json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        # Only on failure: a value encrypted at rest that no key opened.
        if isinstance(text, str) and sealed_state(text) is not None:
            raise sealed_error(text, where) from None
        raise CorruptedRecord(f"{where}: not valid JSON ({type(exc).__name__}: {exc})") from None
    return decode(tree, where)
