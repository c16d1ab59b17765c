"""What every provider conversion shares: groups, media, results and SDK objects.

Providers differ in shape but agree on structure: a conversation is a list of
provider messages, and an assistant's carries text and any number of tool
calls at once. :func:`grouped` finds those groups of Stalwart messages in a
flat ``Message`` list once, so that each provider module only has to render
them.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.message import ActionCall, ActionResult, Media, Message, Text, plain, result_text
from ._tools import parse_arguments

__all__ = [
    "Group",
    "arguments_json",
    "b64",
    "call_message",
    "call_of",
    "data_url",
    "filename_for",
    "get",
    "grouped",
    "only_text",
    "plain_arguments",
    "result_content",
    "result_of",
    "stamped",
    "text_message",
    "unsupported",
]

GroupKind = Literal["system", "user", "assistant", "results"]


@dataclass(slots=True)
class Group:
    """Consecutive messages that a provider sends as one of its messages.

    ``assistant`` groups hold the text and call messages of one actor;
    ``results`` groups hold consecutive action results; ``system`` and
    ``user`` groups hold one message each.
    """

    kind: GroupKind
    messages: list[Message] = field(default_factory=list)


def grouped(messages: Sequence[Message]) -> list[Group]:
    """Group ``messages`` into the messages a provider is sent.

    Checks on the way that every result answers a call made earlier: a
    provider would refuse an orphan result with an opaque 400, and this error
    says which call id is missing.
    """
    out: list[Group] = []
    called: set[str] = set()
    for m in messages:
        last = out[-1] if out else None
        if m.action_result is not None:
            if m.action_result.call_id not in called:
                raise ValueError(
                    f"result of {m.action_result.name!r} answers call id "
                    f"{m.action_result.call_id!r}, which no earlier message calls"
                )
            if last is not None and last.kind == "results":
                last.messages.append(m)
            else:
                out.append(Group("results", [m]))
            continue
        if m.action_call is not None:
            called.add(m.action_call.id)
        if m.role == "assistant" or m.action_call is not None:
            if last is not None and last.kind == "assistant" and last.messages[0].actor == m.actor:
                last.messages.append(m)
            else:
                out.append(Group("assistant", [m]))
        elif m.role == "system":
            out.append(Group("system", [m]))
        elif m.role == "user":
            out.append(Group("user", [m]))
        else:
            raise ValueError(f"a {m.role!r} message must carry an action result (message {m.id})")
    return out


def get(obj: Any, key: str, default: Any = None) -> Any:
    """Read ``key`` from an SDK model or from the same data as a plain dict.

    Accepting both keeps the SDKs optional (no import needed to read their
    objects) and lets recorded JSON be converted exactly like live objects.
    """
    value = obj.get(key, default) if isinstance(obj, Mapping) else getattr(obj, key, default)
    return default if value is None else value


def data_url(media: Media) -> str:
    """The media as a URL: its own, or its bytes in a ``data:`` URL."""
    if media.url is not None:
        return media.url
    return f"data:{media.mime_type};base64,{b64(media)}"


def b64(media: Media) -> str:
    """Inline media data as base64 text, the form every JSON API takes."""
    assert media.data is not None
    return base64.b64encode(media.data).decode("ascii")


def filename_for(media: Media) -> str:
    """A file name for inline data, which some APIs require and Media lacks."""
    ext = mimetypes.guess_extension(media.mime_type, strict=False) or ""
    return f"file{ext}"


def result_content(message: Message) -> tuple[str, list[Media]]:
    """The text and media a model reads for a result message.

    An error always reads as ``"{error_type}: {error_message}"``; otherwise
    text parts the result message carries take precedence over the value, the
    same rule as :attr:`Message.text`.
    """
    result = message.action_result
    assert result is not None
    if result.is_error or not any(isinstance(p, Text) for p in message.parts):
        text = result_text(result)
    else:
        text = "".join(p.text for p in message.parts if isinstance(p, Text))
    return text, message.media


def arguments_json(message: Message) -> str:
    """A call's arguments as the JSON text providers expect.

    A call whose arguments could not be parsed is sent back as ``{}``: the raw
    text the model wrote is in the error result it reads next, and some
    servers refuse a history with invalid JSON in it.
    """
    call = message.action_call
    assert call is not None
    return json.dumps(plain_arguments(message), ensure_ascii=False)


def plain_arguments(message: Message) -> dict[str, Any]:
    """A call's arguments as plain JSON data (``{}`` for an invalid call)."""
    call = message.action_call
    assert call is not None
    if call.invalid is not None:
        return {}
    plain_args: dict[str, Any] = plain(call.arguments)
    return plain_args


def stamped(messages: list[Message], finish_reason: Any, actor: str) -> list[Message]:
    """``messages`` with the provider's finish reason in the first one's
    ``meta["finish_reason"]``, recorded with the step, where tracing reads it
    (``gen_ai.response.finish_reasons``) on replay as well as live. An empty
    reply (a refusal with no text) is an empty message of ``actor`` carrying it."""
    if not isinstance(finish_reason, str) or not finish_reason:
        return messages
    if not messages:
        return [Message("assistant", actor, meta={"finish_reason": finish_reason})]
    first = messages[0]
    meta = {**(first.meta or {}), "finish_reason": finish_reason}
    return [dataclasses.replace(first, meta=meta), *messages[1:]]


def text_message(texts: Sequence[str], actor: str) -> Message | None:
    """An assistant message with one text part per non-empty piece, if any."""
    parts = tuple(Text(t) for t in texts if t)
    return Message("assistant", actor, parts) if parts else None


def call_message(
    call_id: str, name: str, raw_arguments: str | None, actor: str, *, truncated: bool = False
) -> Message:
    arguments, invalid = parse_arguments(raw_arguments, truncated=truncated)
    return Message.call(name, arguments, id=call_id, actor=actor, invalid=invalid)


def unsupported(media: Media, where: str) -> ValueError:
    kind = "a URL" if media.url is not None else "inline data"
    return ValueError(f"{where} does not take {media.mime_type} media given as {kind}")


def result_of(message: Message) -> ActionResult:
    assert message.action_result is not None
    return message.action_result


def call_of(message: Message) -> ActionCall:
    assert message.action_call is not None
    return message.action_call


def only_text(message: Message, where: str) -> str:
    """The text of a message whose place in the provider's format takes no media."""
    if message.media:
        raise unsupported(message.media[0], where)
    return message.text
