"""Message: the one unit of observation and action.

A message is what a policy reads and what it returns. It is shaped after LLM
chat APIs, so that providers convert it without loss: a ``role`` the APIs know
(system, user, assistant, tool), the ``actor`` that produced it (a person, or a
policy's name), content ``parts`` (text and media), and at most one action
``call`` or action ``result``. Parallel tool calls are consecutive call
messages; providers merge them back into one assistant message of their own.

A message never changes once built, down to its payload: the dicts, lists
and sets of a call's ``arguments``, a result's ``value`` and ``meta`` are
copied at construction into read-only containers (:class:`ReadOnlyDict`,
:class:`ReadOnlyList`, :class:`ReadOnlySet`) that read like the builtins they
subclass but refuse every change. The ledger relies on it: a step's
arguments record only what is new, and a message a step has seen is trusted
to be the same object with the same content at the next step (S5). Other
objects inside a payload (a pydantic model, a dataclass) are kept as they
are and must be treated as immutable too.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, SupportsIndex

from .codec import decode, dumps, encode, loads, register_core_type

__all__ = [
    "ActionCall",
    "ActionResult",
    "Media",
    "Message",
    "ReadOnlyDict",
    "ReadOnlyList",
    "ReadOnlySet",
    "Role",
    "Text",
    "freeze",
    "plain",
    "result_text",
    "thaw",
]

Role = Literal["system", "user", "assistant", "tool"]


def _new_id() -> str:
    return uuid.uuid4().hex


# -- read-only payloads -----------------------------------------------------------
# A message's dicts, lists and sets are copied once, when it is built, into
# these: they are still a dict, a list, a set to every reader (isinstance,
# json, pydantic, ==, the codec), but a change raises instead of slipping
# past the ledger, which trusts a message it has seen not to change (S5).
# Copying once per message keeps a round's cost to its new messages; encoding
# every message again each round would make a long conversation quadratic.


def _refused(container: object, method: str) -> NoReturn:
    kind = type(container).__name__
    raise TypeError(
        f"{kind}.{method}(): this {kind[8:].lower()} is part of a stalwart Message, whose "
        "payload is read-only (the ledger trusts a message it has seen not to change); "
        "build a new message instead, e.g. msg.replace(value={**msg.action_result.value, "
        "'k': 1}) or msg.replace(arguments=...), or take a mutable deep copy with "
        "stalwart.core.message.thaw(...)"
    )


class ReadOnlyDict(dict[Any, Any]):
    """A dict inside a :class:`Message`: reads as a dict, refuses changes.

    Its values are read-only too. ``copy()``, ``|`` and ``dict(d)`` give an
    ordinary (shallow) dict; :func:`thaw` a deep mutable copy. It pickles,
    copies and deep-copies as itself.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> ReadOnlyDict:
        self = dict.__new__(cls)
        dict.__init__(self, {k: _freeze(v) for k, v in dict(*args, **kwargs).items()})
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Built by ``__new__``: calling ``__init__`` again changes nothing."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlyDict, (dict(self),))

    def __copy__(self) -> ReadOnlyDict:
        return self

    @classmethod
    def fromkeys(cls, iterable: Any, value: Any = None) -> ReadOnlyDict:
        return cls(dict.fromkeys(iterable, value))

    def __setitem__(self, key: Any, value: Any) -> NoReturn:
        _refused(self, "__setitem__")

    def __delitem__(self, key: Any) -> NoReturn:
        _refused(self, "__delitem__")

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self, "__ior__")

    def clear(self) -> NoReturn:
        _refused(self, "clear")

    def pop(self, *args: Any) -> NoReturn:
        _refused(self, "pop")

    def popitem(self) -> NoReturn:
        _refused(self, "popitem")

    def setdefault(self, *args: Any) -> NoReturn:
        _refused(self, "setdefault")

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refused(self, "update")


class ReadOnlyList(list[Any]):
    """A list inside a :class:`Message`: reads as a list, refuses changes.

    Its items are read-only too. ``copy()``, slicing, ``+`` and ``list(x)``
    give an ordinary (shallow) list; :func:`thaw` a deep mutable copy.
    """

    __slots__ = ()

    def __new__(cls, iterable: Any = ()) -> ReadOnlyList:
        self = list.__new__(cls)
        list.__init__(self, [_freeze(v) for v in iterable])
        return self

    def __init__(self, iterable: Any = ()) -> None:
        """Built by ``__new__``: calling ``__init__`` again changes nothing."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlyList, (list(self),))

    def __copy__(self) -> ReadOnlyList:
        return self

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        _refused(self, "__setitem__")

    def __delitem__(self, index: Any) -> NoReturn:
        _refused(self, "__delitem__")

    def __iadd__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self, "__iadd__")

    def __imul__(self, n: SupportsIndex) -> NoReturn:
        _refused(self, "__imul__")

    def append(self, value: Any) -> NoReturn:
        _refused(self, "append")

    def extend(self, values: Any) -> NoReturn:
        _refused(self, "extend")

    def insert(self, index: SupportsIndex, value: Any) -> NoReturn:
        _refused(self, "insert")

    def pop(self, index: SupportsIndex = -1) -> NoReturn:
        _refused(self, "pop")

    def remove(self, value: Any) -> NoReturn:
        _refused(self, "remove")

    def clear(self) -> NoReturn:
        _refused(self, "clear")

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refused(self, "sort")

    def reverse(self) -> NoReturn:
        _refused(self, "reverse")


class ReadOnlySet(set[Any]):
    """A set inside a :class:`Message`: reads as a set, refuses changes.

    ``copy()``, ``|``, ``&``, ``-`` and ``set(x)`` give an ordinary set.
    """

    __slots__ = ()

    def __new__(cls, iterable: Any = ()) -> ReadOnlySet:
        self = set.__new__(cls)
        set.__init__(self, iterable)
        return self

    def __init__(self, iterable: Any = ()) -> None:
        """Built by ``__new__``: calling ``__init__`` again changes nothing."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlySet, (set(self),))

    def __copy__(self) -> ReadOnlySet:
        return self

    def add(self, value: Any) -> NoReturn:
        _refused(self, "add")

    def discard(self, value: Any) -> NoReturn:
        _refused(self, "discard")

    def remove(self, value: Any) -> NoReturn:
        _refused(self, "remove")

    def pop(self) -> NoReturn:
        _refused(self, "pop")

    def clear(self) -> NoReturn:
        _refused(self, "clear")

    def update(self, *others: Any) -> NoReturn:
        _refused(self, "update")

    def difference_update(self, *others: Any) -> NoReturn:
        _refused(self, "difference_update")

    def intersection_update(self, *others: Any) -> NoReturn:
        _refused(self, "intersection_update")

    def symmetric_difference_update(self, other: Any) -> NoReturn:
        _refused(self, "symmetric_difference_update")

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self, "__ior__")

    def __iand__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self, "__iand__")

    def __isub__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self, "__isub__")

    def __ixor__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self, "__ixor__")


# Values kept as they are: immutable already (a Message is frozen; the
# read-only containers hold only read-only values).
_KEPT: frozenset[type] = frozenset(
    {str, int, float, bool, type(None), bytes, frozenset, ReadOnlyDict, ReadOnlyList, ReadOnlySet}
)


def freeze(value: Any, where: str = "a message's payload") -> Any:
    """``value`` with every dict, list and set in it (through tuples too)
    copied into a read-only one; anything else kept as it is.

    A value that holds nothing to copy is returned itself. Objects that are
    not containers (a pydantic model, a dataclass, a Message) are kept, not
    copied: treat them as immutable. Raises ``ValueError`` naming ``where``
    for a value that contains itself.
    """
    if type(value) in _KEPT:
        return value
    try:
        return _freeze(value)
    except RecursionError:
        raise ValueError(f"{where}: the value is nested too deeply, or contains itself") from None


def _freeze(value: Any) -> Any:
    # The hot path of building a message: plain dicts and lists of scalars
    # are copied at C speed, without a call per scalar (B9, a provider's reply).
    t = type(value)
    if t in _KEPT:
        return value
    if t is dict or isinstance(value, dict):
        d = _dict_new(ReadOnlyDict)
        _dict_init(d, {k: v if type(v) in _KEPT else _freeze(v) for k, v in value.items()})
        return d
    if t is list or isinstance(value, list):
        lst = _list_new(ReadOnlyList)
        _list_init(lst, [v if type(v) in _KEPT else _freeze(v) for v in value])
        return lst
    if isinstance(value, tuple) and not hasattr(value, "_fields"):  # not a named tuple
        items = [_freeze(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return tuple(items)
    if isinstance(value, set):
        return ReadOnlySet(value)  # set items are hashable: nothing inside to copy
    return value


_dict_new, _dict_init = dict.__new__, dict.__init__
_list_new, _list_init = list.__new__, list.__init__


def thaw(value: Any) -> Any:
    """A mutable deep copy of a payload: plain dicts, lists and sets again,
    to change and build a new message from. Other objects are shared."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(thaw(v) for v in value)
    if isinstance(value, set) and not isinstance(value, frozenset):
        return set(value)
    return value


@dataclass(frozen=True, slots=True)
class Text:
    """A text part."""

    text: str


@dataclass(frozen=True, slots=True)
class Media:
    """A media part (image, audio, document), inline ``data`` or by ``url``."""

    mime_type: str
    data: bytes | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ValueError("Media needs exactly one of data or url")
        if self.data is not None and type(self.data) is not bytes:  # a bytearray can change
            object.__setattr__(self, "data", bytes(self.data))


@dataclass(frozen=True, slots=True)
class ActionCall:
    """A request to run the option ``name`` with ``arguments``.

    ``invalid`` carries why the arguments could not be parsed (a model that
    wrote broken JSON); the engine turns such a call into an error result the
    model can read instead of running it.
    """

    id: str
    name: str
    arguments: dict[str, Any]  # a ReadOnlyDict once built
    invalid: str | None = None

    def __post_init__(self) -> None:
        if type(self.arguments) is not ReadOnlyDict:
            object.__setattr__(
                self, "arguments", freeze(self.arguments, f"arguments of {self.name!r}")
            )


@dataclass(frozen=True, slots=True)
class ActionResult:
    """The outcome of the action call ``call_id``: a value, or an error."""

    call_id: str
    name: str
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None

    def __post_init__(self) -> None:
        if type(self.value) not in _KEPT:
            object.__setattr__(self, "value", freeze(self.value, f"result of {self.name!r}"))

    @property
    def is_error(self) -> bool:
        return self.error_type is not None


Part = Text | Media
_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class Message:
    """One observation or action. Immutable, down to the dicts and lists of
    its payload; build with the class methods, change with :meth:`replace`."""

    role: Role
    actor: str
    parts: tuple[Part, ...] = ()
    action_call: ActionCall | None = None
    action_result: ActionResult | None = None
    id: str = field(default_factory=_new_id)
    # Provider details a conversation must carry but Stalwart does not
    # interpret: token usage, finish reason, reasoning or thinking blocks that
    # must be sent back. JSON values only.
    meta: dict[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if type(self.parts) is not tuple:  # a list of parts could change
            object.__setattr__(self, "parts", tuple(self.parts))
        if self.meta is not None and type(self.meta) is not ReadOnlyDict:
            object.__setattr__(self, "meta", freeze(self.meta, "message meta"))

    # -- building -----------------------------------------------------------
    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", "system", (Text(text),))

    @classmethod
    def user(cls, *content: str | Media, actor: str = "user") -> Message:
        return cls("user", actor, _parts(content))

    @classmethod
    def assistant(cls, *content: str | Media, actor: str = "assistant") -> Message:
        return cls("assistant", actor, _parts(content))

    @classmethod
    def call(
        cls,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        id: str | None = None,
        actor: str = "assistant",
        invalid: str | None = None,
    ) -> Message:
        """A call of the option ``name``; ``id`` pairs it with its result."""
        call = ActionCall(id or f"call_{_new_id()[:16]}", name, arguments or {}, invalid)
        return cls("assistant", actor, (), action_call=call)

    @classmethod
    def result(
        cls,
        call: ActionCall | Message | str,
        value: Any = None,
        *,
        name: str | None = None,
        error: BaseException | None = None,
        error_type: str | None = None,
        error_message: str | None = None,
        actor: str | None = None,
    ) -> Message:
        """The result of ``call`` (a call, its message, or its id).

        Pass ``error`` (an exception) or ``error_type``/``error_message`` for a
        failed call; the model reads ``"{error_type}: {error_message}"``.
        """
        if isinstance(call, Message):
            if call.action_call is None:
                raise ValueError("result() needs an action call message")
            call = call.action_call
        if isinstance(call, ActionCall):
            call_id, name = call.id, name or call.name
        else:
            call_id = call
        if name is None:
            raise ValueError("result() needs the option name when given a bare call id")
        if error is not None:
            error_type = error_type or type(error).__name__
            error_message = error_message if error_message is not None else str(error)
        result = ActionResult(call_id, name, value, error_type, error_message)
        return cls("tool", actor or name, (), action_result=result)

    def replace(self, *, arguments: Any = _UNSET, value: Any = _UNSET, **changes: Any) -> Message:
        """A new message like this one with ``changes`` (its fields by name).

        ``arguments=`` gives a call message new call arguments, ``value=`` a
        result message a new value: the way to "change" a payload, which is
        read-only (``msg.replace(value={**msg.action_result.value, "k": 1})``).
        The id is kept unless ``id=`` is given, as with ``dataclasses.replace``.
        """
        if arguments is not _UNSET:
            if self.action_call is None:
                raise ValueError(f"replace(arguments=...): message {self.id} is not an action call")
            call = changes.get("action_call", self.action_call)
            changes["action_call"] = dataclasses.replace(call, arguments=arguments)
        if value is not _UNSET:
            if self.action_result is None:
                raise ValueError(f"replace(value=...): message {self.id} is not an action result")
            result = changes.get("action_result", self.action_result)
            changes["action_result"] = dataclasses.replace(result, value=value)
        return dataclasses.replace(self, **changes)

    # -- reading ------------------------------------------------------------
    @property
    def text(self) -> str:
        """The text parts joined; for a result, the text a model would read."""
        if self.action_result is not None and not self.parts:
            return result_text(self.action_result)
        return "".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def media(self) -> list[Media]:
        return [p for p in self.parts if isinstance(p, Media)]

    @property
    def is_action_call(self) -> bool:
        return self.action_call is not None

    @property
    def is_action_result(self) -> bool:
        return self.action_result is not None

    @property
    def is_error(self) -> bool:
        return self.action_result is not None and self.action_result.is_error

    # -- JSON ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` gives back an equal message."""
        out: dict[str, Any] = {"id": self.id, "role": self.role, "actor": self.actor}
        if self.parts:
            out["parts"] = [_part_to_dict(p) for p in self.parts]
        if self.action_call is not None:
            c = self.action_call
            out["call"] = {"id": c.id, "name": c.name, "arguments": encode(c.arguments)}
            if c.invalid is not None:
                out["call"]["invalid"] = c.invalid
        if self.action_result is not None:
            r = self.action_result
            res: dict[str, Any] = {"call_id": r.call_id, "name": r.name}
            if r.value is not None:
                res["value"] = encode(r.value, f"result of {r.name!r}")
            if r.error_type is not None:
                res["error_type"] = r.error_type
                res["error_message"] = r.error_message
            out["result"] = res
        if self.meta:
            out["meta"] = encode(self.meta, "message meta")
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        call = result = None
        if (c := data.get("call")) is not None:
            call = ActionCall(c["id"], c["name"], decode(c["arguments"]), c.get("invalid"))
        if (r := data.get("result")) is not None:
            result = ActionResult(
                r["call_id"],
                r["name"],
                decode(r.get("value")),
                r.get("error_type"),
                r.get("error_message"),
            )
        parts = tuple(_part_from_dict(p) for p in data.get("parts", ()))
        meta = decode(data["meta"]) if "meta" in data else None
        # Recorded step arguments leave ids out (see core/engine/identity.py: identity_json).
        msg_id = data.get("id") or _new_id()
        return cls(data["role"], data["actor"], parts, call, result, msg_id, meta)

    def to_json(self) -> str:
        return dumps(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> Message:
        value = loads(text)
        if not isinstance(value, Message):
            raise TypeError("JSON text does not hold a Message")
        return value


def result_text(result: ActionResult) -> str:
    """What a model reads for a result: the value as JSON, or the error."""
    if result.error_type is not None:
        return f"{result.error_type}: {result.error_message}"
    value = result.value
    if isinstance(value, str):
        return value
    if isinstance(value, Message):  # a sub-agent's answer reads as its text
        return value.text
    import json

    return json.dumps(plain(value), ensure_ascii=False)


def plain(value: Any) -> Any:
    """``value`` as the plain JSON data a model reads: no codec tags."""
    return _plain(encode(value, "a value shown to a model", strict=False))


def _plain(tree: Any) -> Any:
    """Strip codec tags so a model sees the data, not our bookkeeping."""
    if isinstance(tree, list):
        return [_plain(v) for v in tree]
    if isinstance(tree, dict):
        if "$t" in tree:
            inner = tree["v"]
            if tree["$t"] == "msg":
                return Message.from_dict(inner).text
            if tree["$t"] == "map":
                return {str(_plain(k)): _plain(v) for k, v in inner}
            if tree["$t"] == "dict":  # a user dict that has a "$t" key of its own
                return {k: _plain(v) for k, v in inner.items()}
            return _plain(inner)
        return {k: _plain(v) for k, v in tree.items()}
    return tree


def _parts(content: tuple[str | Media, ...]) -> tuple[Part, ...]:
    return tuple(Text(c) if isinstance(c, str) else c for c in content)


def _part_to_dict(p: Part) -> dict[str, Any]:
    if isinstance(p, Text):
        return {"type": "text", "text": p.text}
    d: dict[str, Any] = {"type": "media", "mime_type": p.mime_type}
    if p.data is not None:
        d["data"] = base64.b64encode(p.data).decode("ascii")
    else:
        d["url"] = p.url
    return d


def _part_from_dict(d: dict[str, Any]) -> Part:
    if d["type"] == "text":
        return Text(d["text"])
    data = d.get("data")
    return Media(d["mime_type"], base64.b64decode(data) if data is not None else None, d.get("url"))


register_core_type(Message, "msg", Message.to_dict, Message.from_dict)
