"""Messages to and from the Anthropic Messages API.

Anthropic differs from OpenAI in three ways that shape this module: the system
prompt is a request parameter, not a message; tool results are ``tool_result``
blocks inside a *user* message (all results of one assistant message in one
user message, before any text); and the roles alternate, so consecutive messages of one role
are merged into one. Content is always sent as a list of blocks so that merging
is a list extension.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.errors import ProviderStreamError
from ..core.message import Media, Message, Text
from ._common import (
    b64,
    call_message,
    call_of,
    get,
    grouped,
    only_text,
    plain_arguments,
    result_content,
    result_of,
    stamped,
    text_message,
    unsupported,
)
from ._tools import ToolSpec
from ._usage import Usage

__all__ = [
    "AnthropicStreamAccumulator",
    "anthropic_usage",
    "from_anthropic_content",
    "from_anthropic_message",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})


# -- request -------------------------------------------------------------------------


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """``tools`` for the Messages API."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        spec: dict[str, Any] = {"name": tool.name}
        if tool.description:
            spec["description"] = tool.description
        spec["input_schema"] = tool.parameters
        out.append(spec)
    return out


def to_anthropic_messages(
    messages: Sequence[Message],
) -> tuple[str | None, list[dict[str, Any]]]:
    """The ``system`` parameter and the ``messages`` for the Messages API.

    System messages before the conversation starts become ``system`` (joined
    by blank lines); a system message later on has no place of its own in
    the API and is sent as user text where it stands, so the model still
    reads it at that point.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for group in grouped(messages):
        if group.kind == "system":
            text = only_text(group.messages[0], "an Anthropic system prompt")
            if not out:
                system.append(text)
                continue
            role, blocks = "user", _text_blocks(text)
        elif group.kind == "user":
            role, blocks = "user", _user_blocks(group.messages[0])
        elif group.kind == "assistant":
            role, blocks = "assistant", _assistant_blocks(group.messages)
        else:
            role, blocks = "user", [_tool_result(m) for m in group.messages]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), out


def _text_blocks(text: str) -> list[dict[str, Any]]:
    # Anthropic refuses empty text blocks.
    return [{"type": "text", "text": text}] if text else []


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in message.parts:
        if isinstance(p, Text):
            blocks.extend(_text_blocks(p.text))
        else:
            blocks.append(_media_block(p))
    return blocks


def _media_block(media: Media) -> dict[str, Any]:
    mime = media.mime_type
    if mime in _IMAGE_TYPES or (mime.startswith("image/") and media.url is not None):
        if media.url is not None:
            return {"type": "image", "source": {"type": "url", "url": media.url}}
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": mime, "data": b64(media)},
        }
    if mime == "application/pdf":
        if media.url is not None:
            return {"type": "document", "source": {"type": "url", "url": media.url}}
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": mime, "data": b64(media)},
        }
    if mime == "text/plain" and media.data is not None:
        text = media.data.decode("utf-8")
        return {"type": "document", "source": {"type": "text", "media_type": mime, "data": text}}
    raise unsupported(media, "the Anthropic Messages API")


def _assistant_blocks(messages: list[Message]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for m in messages:
        if m.action_call is not None:
            call = call_of(m)
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": plain_arguments(m)}
            )
        else:
            if m.media:
                raise unsupported(m.media[0], "an Anthropic assistant message")
            for p in m.parts:
                if isinstance(p, Text):
                    blocks.extend(_text_blocks(p.text))
    return blocks


def _tool_result(message: Message) -> dict[str, Any]:
    result = result_of(message)
    text, media = result_content(message)
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
    if media:
        block["content"] = _text_blocks(text) + [_media_block(x) for x in media]
    elif text:
        block["content"] = text
    if result.is_error:
        block["is_error"] = True
    return block


# -- response ------------------------------------------------------------------------


def anthropic_usage(usage: Any) -> Usage:
    """Usage with cache reads and writes counted as input, as OpenAI counts them."""
    if usage is None:
        return Usage()
    prompt = (
        get(usage, "input_tokens", 0)
        + get(usage, "cache_creation_input_tokens", 0)
        + get(usage, "cache_read_input_tokens", 0)
    )
    return Usage(prompt, get(usage, "output_tokens", 0))


def from_anthropic_content(
    content: Sequence[Any], *, actor: str = "assistant", truncated: bool = False
) -> list[Message]:
    """The Messages of an assistant message's blocks, in their order.

    Adjacent text blocks (Anthropic splits text around citations) become one
    Message with a part each. Blocks Stalwart has no Message for (thinking,
    server tools) are left out.
    """
    out: list[Message] = []
    texts: list[str] = []
    for block in content:
        kind = get(block, "type")
        if kind == "text":
            texts.append(get(block, "text", ""))
        elif kind == "tool_use":
            head = text_message(texts, actor)
            if head is not None:
                out.append(head)
            texts = []
            out.append(_tool_use(block, actor, truncated))
    head = text_message(texts, actor)
    if head is not None:
        out.append(head)
    return out


def _tool_use(block: Any, actor: str, truncated: bool) -> Message:
    call_id, name = get(block, "id", ""), get(block, "name", "")
    raw = get(block, "input", {})
    if isinstance(raw, Mapping):
        return Message.call(name, dict(raw), id=call_id, actor=actor)
    if isinstance(raw, str):
        return call_message(call_id, name, raw, actor, truncated=truncated)
    return Message.call(
        name, id=call_id, actor=actor, invalid=f"the input must be a JSON object: {raw!r}"
    )


def from_anthropic_message(
    message: Any, *, actor: str = "assistant"
) -> tuple[list[Message], Usage]:
    """The Messages and usage of a Messages API response."""
    truncated = get(message, "stop_reason") in _TRUNCATED
    content = get(message, "content", ())
    messages = from_anthropic_content(content, actor=actor, truncated=truncated)
    return stamped(messages, get(message, "stop_reason"), actor), anthropic_usage(
        get(message, "usage")
    )


_USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


class AnthropicStreamAccumulator:
    """Folds raw Messages API stream events into text deltas and the final Messages.

    Tool input arrives as pieces of JSON text and is parsed once its block is
    complete, so a reply cut off mid-call gives an ``invalid`` call instead of
    an exception. Usage counts in ``message_delta`` are cumulative and replace
    those of ``message_start``.
    """

    def __init__(self, *, actor: str = "assistant") -> None:
        self.actor = actor
        self._blocks: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, int] = dict.fromkeys(_USAGE_KEYS, 0)
        self._stop_reason: str | None = None
        self._stopped = False

    def feed(self, event: Any) -> str | None:
        """Take one event; return the text it adds, if any."""
        kind = get(event, "type")
        if kind == "content_block_delta":
            return self._delta(get(event, "index", 0), get(event, "delta"))
        if kind == "content_block_start":
            block = get(event, "content_block")
            self._blocks[get(event, "index", 0)] = {
                "type": get(block, "type"),
                "id": get(block, "id", ""),
                "name": get(block, "name", ""),
                "text": [get(block, "text", "")],
                "json": [],
            }
            text = get(block, "text", "")
            return text if isinstance(text, str) and text else None
        if kind == "message_start":
            self._take_usage(get(get(event, "message"), "usage"))
        elif kind == "message_delta":
            self._stop_reason = get(get(event, "delta"), "stop_reason", self._stop_reason)
            self._take_usage(get(event, "usage"))
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            error = get(event, "error", {})
            raise ProviderStreamError(get(error, "message", "stream error"), get(error, "type"))
        return None

    def _delta(self, index: int, delta: Any) -> str | None:
        block = self._blocks.get(index)
        if block is None:
            return None
        kind = get(delta, "type")
        if kind == "text_delta":
            text = get(delta, "text", "")
            block["text"].append(text)
            return text if isinstance(text, str) and text else None
        if kind == "input_json_delta":
            block["json"].append(get(delta, "partial_json", ""))
        return None

    def _take_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for key in _USAGE_KEYS:
            value = get(usage, key)
            if isinstance(value, int):
                self._usage[key] = value

    def finish(self) -> tuple[list[Message], Usage]:
        """The reply as Messages, and its usage; raises if the stream broke off."""
        if not self._stopped and self._stop_reason is None:
            raise ProviderStreamError("the stream ended before the message finished")
        truncated = self._stop_reason in _TRUNCATED
        out: list[Message] = []
        texts: list[str] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block["type"] == "text":
                texts.append("".join(block["text"]))
            elif block["type"] == "tool_use":
                head = text_message(texts, self.actor)
                if head is not None:
                    out.append(head)
                texts = []
                raw = "".join(block["json"])
                out.append(
                    call_message(block["id"], block["name"], raw, self.actor, truncated=truncated)
                )
        head = text_message(texts, self.actor)
        if head is not None:
            out.append(head)
        return stamped(out, self._stop_reason, self.actor), anthropic_usage(self._usage)
