"""Recorded values as text: read from their JSON without the codec, shown as data.

A tagged dataclass, model or enum shows as its type's name and its fields
(``Point(x=1, y=2)``); a message is rebuilt from its fields by hand, never
through the codec, so nothing is imported (S13). Strings are made printable
where they are shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from ...core.message import ActionCall, ActionResult, Media, Message
from ...core.message import Text as TextPart
from ...core.redact import printable
from ...core.sealed import sealed_state

__all__ = [
    "Sealed",
    "Typed",
    "Unreadable",
    "error_text",
    "is_messages",
    "message_line",
    "plain",
    "short",
    "stored",
    "value_text",
]


@dataclass(frozen=True, slots=True)
class Typed:
    """A recorded value of an application type: its type's name and its data.

    Shown, never rebuilt: the class a row names is only a string here.
    """

    name: str
    value: Any


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A column that is not JSON (a corrupted or hand-edited row): shown as text."""

    text: str


@dataclass(frozen=True, slots=True)
class Sealed:
    """A value encrypted at rest that this process cannot open: ``state``
    is ``encrypted`` (no key held opens it) or ``erased`` (its subject's
    key was deleted). Shown as the word, never as its ciphertext."""

    state: str


def stored(text: str | None) -> Any:
    """The value a JSON column holds, as data to show (see :func:`plain`)."""
    if text is None:
        return None
    try:
        return plain(json.loads(text))
    except (ValueError, RecursionError):
        state = sealed_state(text)
        return Unreadable(text) if state is None else Sealed(state)


def plain(tree: Any) -> Any:
    """A codec JSON tree as plain data for a reader, without the codec.

    Tuples and sets read as lists; datetimes, dates and UUIDs as their
    text; a tagged dataclass, model or enum (or a tag this version does not
    know) as :class:`Typed`; a message as a :class:`Message` rebuilt from
    its fields, holding plain data. Strings stay as stored: they are made
    printable where they are shown.
    """
    if isinstance(tree, list):
        return [plain(v) for v in tree]
    if isinstance(tree, dict):
        tag = tree.get("$t")
        if isinstance(tag, str) and "v" in tree:
            return _tagged(tag, tree)
        return {str(k): plain(v) for k, v in tree.items()}
    return tree  # a string, a number, a bool or None


def _tagged(tag: str, tree: dict[str, Any]) -> Any:
    value = plain(tree["v"])
    if tag in ("dict", "tuple", "set", "frozenset", "datetime", "date", "uuid"):
        return value
    if tag == "map" and isinstance(value, list):
        pairs = [p for p in value if isinstance(p, list) and len(p) == 2]
        return {k if isinstance(k, str) else _text(k): v for k, v in pairs}
    if tag == "bytes" and isinstance(value, str):  # base64: 4 characters for 3 bytes
        return f"<{len(value) * 3 // 4 - value.count('=')} bytes>"
    if tag == "msg" and isinstance(value, dict):
        return _message(value) or Typed("Message", value)
    name = tree.get("c")
    label = name.rpartition(":")[2] if isinstance(name, str) else ""
    return Typed(label or tag, value)


def _message(d: dict[str, Any]) -> Message | None:
    """A recorded message from its fields (already plain), or None if it is not one."""
    try:
        parts = tuple(
            TextPart(str(p["text"])) if p.get("type") == "text" else _media(p)
            for p in d.get("parts", ())
        )
        call = result = None
        if isinstance(c := d.get("call"), dict):
            args = c.get("arguments")
            call = ActionCall(
                str(c["id"]),
                str(c["name"]),
                args if isinstance(args, dict) else {},
                c.get("invalid"),
            )
        if isinstance(r := d.get("result"), dict):
            result = ActionResult(
                str(r["call_id"]),
                str(r["name"]),
                r.get("value"),
                r.get("error_type"),
                r.get("error_message"),
            )
        return Message(d["role"], str(d["actor"]), parts, call, result, str(d.get("id", "")))
    except (KeyError, TypeError, AttributeError, ValueError):
        return None


def _media(part: dict[str, Any]) -> Media:
    """A media part for counting; its data is not decoded (it is never shown)."""
    url = part.get("url")
    return Media(str(part.get("mime_type", "")), None if url else b"", str(url) if url else None)


def short(text: str, limit: int | None) -> str:
    """One line, at most ``limit`` characters (None: no limit)."""
    text = " ".join(text.split()) if limit is not None else text
    if limit is None or len(text) <= limit:
        return text
    return text[: max(1, limit - 1)] + "…"


def error_text(error_json: str) -> str:
    """``Type: message`` of a recorded error, without importing its type."""
    state = sealed_state(error_json)
    if state is not None:
        return f"({state})"
    try:
        data = json.loads(error_json)
        type_name = str(data.get("type", "Error")).rpartition(".")[2]
        return printable(f"{type_name}: {data.get('message', '')}")
    except (ValueError, AttributeError, RecursionError):
        return printable(error_json)


def is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, Message) for m in value)


def value_text(value: Any, limit: int | None = 100) -> str:
    """A value in one line: messages as counts, strings as they are."""
    if isinstance(value, Unreadable):
        return short(printable(f"(not JSON) {value.text}"), limit)
    if isinstance(value, Sealed):
        return f"({value.state})"
    if isinstance(value, Message):
        return short(_message_plain(value), limit)
    if is_messages(value):
        return f"[{len(value)} messages]"
    if isinstance(value, str):
        return short(printable(value), limit)
    return short(_text(value), limit)


def _text(value: Any) -> str:
    """A value as JSON-like text; an application value as ``Name(field=...)``."""
    if isinstance(value, Typed):
        name = printable(value.name)
        if isinstance(value.value, dict):
            fields = ", ".join(f"{printable(k)}={_text(v)}" for k, v in value.value.items())
            return f"{name}({fields})"
        return f"{name}({_text(value.value)})"
    if isinstance(value, Message):
        return _json(_message_plain(value))
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json(str(k))}: {_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Unreadable):
        return printable(value.text)
    if isinstance(value, Sealed):
        return f"({value.state})"
    return _json(value)


def _json(value: Any) -> str:
    """A JSON scalar as JSON text, printable (JSON escapes C0 controls, not C1)."""
    try:
        return printable(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return printable(repr(value))


def _message_plain(m: Message) -> str:
    return message_line(m, None).plain


def message_line(m: Message, limit: int | None = 100) -> Text:
    """role (actor): text, → call(args), or ← result, as a reader wants them."""
    who = m.role if m.actor in (m.role, "") else f"{m.role} ({m.actor})"
    line = Text(printable(who), style="bold")
    if m.action_call is not None:
        c = m.action_call
        args = ", ".join(f"{k}={_text(v)}" for k, v in c.arguments.items())
        line.append(" → ", style="cyan")
        line.append(printable(short(f"{c.name}({args})", limit)), style="cyan")
        line.append(printable(f"  [{c.id}]"), style="dim")
        if c.invalid:
            invalid = short(str(c.invalid), limit)
            line.append(printable(f"  invalid arguments: {invalid}"), style="red")
        return line
    if m.action_result is not None:
        r = m.action_result
        line.append(" ← ", style="green" if not r.is_error else "red")
        if r.is_error:
            line.append(printable(short(f"{r.error_type}: {r.error_message}", limit)), style="red")
        else:
            line.append(short(_result_text(m, r), limit))
        line.append(printable(f"  [{r.call_id}]"), style="dim")
        return line
    line.append(": ")
    line.append(printable(short(m.text, limit)))
    if m.media:
        line.append(f"  (+{len(m.media)} media)", style="dim")
    return line


def _result_text(m: Message, r: ActionResult) -> str:
    """What a model read for a result, from the plain recorded value."""
    if m.parts:
        return printable(m.text)
    if isinstance(r.value, str):
        return printable(r.value)
    if isinstance(r.value, Message):
        return printable(r.value.text)
    return _text(r.value)
