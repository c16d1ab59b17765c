"""Message: the one unit of observation and action.

A message is what a policy reads and what it returns. It is shaped after LLM
chat APIs, so that providers convert it without loss: a ``role`` the APIs know
(system, user, assistant, tool), the ``actor`` that produced it (a person, or a
policy's name), content ``parts`` (text and media), and at most one action
``call`` or action ``result``. Parallel tool calls are consecutive call
messages; providers merge them back into one assistant turn.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from .codec import decode, dumps, encode, loads, register_core_type

__all__ = ["ActionCall", "ActionResult", "Media", "Message", "Role", "Text", "plain", "result_text"]

Role = Literal["system", "user", "assistant", "tool"]


def _new_id() -> str:
    return uuid.uuid4().hex


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


@dataclass(frozen=True, slots=True)
class ActionCall:
    """A request to run the option ``name`` with ``arguments``.

    ``invalid`` carries why the arguments could not be parsed (a model that
    wrote broken JSON); the runtime turns such a call into an error result the
    model can read instead of running it.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    invalid: str | None = None


@dataclass(frozen=True, slots=True)
class ActionResult:
    """The outcome of the action call ``call_id``: a value, or an error."""

    call_id: str
    name: str
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None

    @property
    def is_error(self) -> bool:
        return self.error_type is not None


Part = Text | Media


@dataclass(frozen=True, slots=True)
class Message:
    """One observation or action. Immutable; build with the class methods."""

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
        call = ActionCall(id or f"call_{_new_id()[:16]}", name, dict(arguments or {}), invalid)
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
        # Recorded step arguments leave ids out (see runtime._identity_json).
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
