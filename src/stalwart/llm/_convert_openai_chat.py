"""Messages to and from OpenAI Chat Completions.

Requests are built as plain JSON-shaped dicts, which the SDK sends as they are;
responses are read with :func:`~._common.get`, so SDK objects and recorded
JSON convert alike and the ``openai`` package is never imported here.

Chat Completions keeps an assistant's group in one message (``content`` plus
``tool_calls``), and results as ``tool`` messages, which take no media: the
media a result carries follows them in a user message. It is also the API
OpenAI-compatible servers speak, so the reader is lenient where they differ
(content as a list of parts, a tool name repeated or split across chunks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import ProviderStreamError
from ..core.message import Media, Message, Text
from ._common import (
    arguments_json,
    b64,
    call_message,
    data_url,
    filename_for,
    get,
    grouped,
    only_text,
    result_content,
    result_of,
    stamped,
    text_message,
    unsupported,
)
from ._tools import ToolSpec
from ._usage import Usage

__all__ = [
    "ChatStreamAccumulator",
    "chat_usage",
    "from_chat_completion",
    "from_chat_message",
    "to_chat_messages",
    "to_chat_tools",
]

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


# -- Chat Completions: request ----------------------------------------------------


def to_chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """``tools`` for Chat Completions."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        out.append({"type": "function", "function": function})
    return out


def to_chat_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``messages`` for Chat Completions.

    Chat Completions takes no media in ``tool`` messages, so media a result
    carries follows the run of tool messages in one user message, labelled
    with the call it came from.
    """
    out: list[dict[str, Any]] = []
    for group in grouped(messages):
        if group.kind == "system":
            text = only_text(group.messages[0], "an OpenAI chat system message")
            out.append({"role": "system", "content": text})
        elif group.kind == "user":
            out.append({"role": "user", "content": _chat_user_content(group.messages[0])})
        elif group.kind == "assistant":
            assistant = _chat_assistant(group.messages)
            if assistant is not None:
                out.append(assistant)
        else:
            media_parts: list[dict[str, Any]] = []
            for m in group.messages:
                result = result_of(m)
                text, media = result_content(m)
                out.append({"role": "tool", "tool_call_id": result.call_id, "content": text})
                if media:
                    label = f"Media returned by {result.name} (call {result.call_id}):"
                    media_parts.append({"type": "text", "text": label})
                    media_parts.extend(_chat_media(x) for x in media)
            if media_parts:
                out.append({"role": "user", "content": media_parts})
    return out


def _chat_user_content(message: Message) -> str | list[dict[str, Any]]:
    if not message.media and len(message.parts) <= 1:
        return message.text
    return [
        {"type": "text", "text": p.text} if isinstance(p, Text) else _chat_media(p)
        for p in message.parts
    ]


def _chat_media(media: Media) -> dict[str, Any]:
    if media.mime_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": data_url(media)}}
    if media.data is None:
        raise unsupported(media, "OpenAI Chat Completions")
    audio_format = _AUDIO_FORMATS.get(media.mime_type)
    if audio_format is not None:
        return {"type": "input_audio", "input_audio": {"data": b64(media), "format": audio_format}}
    if media.mime_type.startswith("audio/"):
        raise unsupported(media, "OpenAI Chat Completions")
    return {"type": "file", "file": {"filename": filename_for(media), "file_data": data_url(media)}}


def _chat_assistant(messages: list[Message]) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for m in messages:
        if m.action_call is not None:
            call = m.action_call
            calls.append(
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments_json(m)},
                }
            )
            continue
        if m.media:
            raise unsupported(m.media[0], "an OpenAI chat assistant message")
        texts.extend(p.text for p in m.parts if isinstance(p, Text) and p.text)
    if not texts and not calls:
        return None
    content: str | list[dict[str, Any]] | None = None
    if len(texts) == 1:
        content = texts[0]
    elif texts:
        content = [{"type": "text", "text": t} for t in texts]
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = calls
    return out


# -- Chat Completions: response ----------------------------------------------------


def chat_usage(usage: Any) -> Usage:
    """Usage of a completion (``prompt_tokens`` already include cached ones)."""
    if usage is None:
        return Usage()
    return Usage(get(usage, "prompt_tokens", 0), get(usage, "completion_tokens", 0))


def from_chat_message(
    message: Any, *, actor: str = "assistant", truncated: bool = False
) -> list[Message]:
    """The Messages of one assistant message: its text (or refusal), then its calls.

    ``truncated`` says the reply hit the token limit, so that a call whose
    arguments were cut off says so in ``invalid``.
    """
    out: list[Message] = []
    text = _chat_text(get(message, "content")) or get(message, "refusal", "")
    head = text_message([text], actor)
    if head is not None:
        out.append(head)
    for tc in get(message, "tool_calls", ()):
        out.append(_chat_call(tc, actor, truncated))
    return out


def _chat_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # Some OpenAI-compatible servers answer with a list of content parts.
    return "".join(get(p, "text", "") for p in content if get(p, "type") == "text")


def _chat_call(tc: Any, actor: str, truncated: bool) -> Message:
    kind = get(tc, "type", "function")
    if kind == "function":
        function = get(tc, "function", {})
        return call_message(
            get(tc, "id", ""),
            get(function, "name", ""),
            get(function, "arguments"),
            actor,
            truncated=truncated,
        )
    # A kind of call Stalwart never offers (custom tools): keep it, so that the
    # model reads an error for it instead of a call that vanished.
    body = get(tc, kind, {})
    return Message.call(
        get(body, "name", kind),
        id=get(tc, "id", ""),
        actor=actor,
        invalid=f"tool calls of type {kind!r} are not supported",
    )


def from_chat_completion(
    completion: Any, *, actor: str = "assistant"
) -> tuple[list[Message], Usage]:
    """The Messages and usage of a completion (its first choice)."""
    usage = chat_usage(get(completion, "usage"))
    choices = get(completion, "choices", ())
    if not choices:
        return [], usage
    choice = choices[0]
    reason = get(choice, "finish_reason")
    messages = from_chat_message(get(choice, "message"), actor=actor, truncated=reason == "length")
    return stamped(messages, reason, actor), usage


class _ChatCall:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class ChatStreamAccumulator:
    """Folds Chat Completions chunks into text deltas and the final Messages.

    Only the first choice is followed. Usage comes in a last chunk only when
    the request asked for it (``stream_options={"include_usage": True}``).
    """

    def __init__(self, *, actor: str = "assistant") -> None:
        self.actor = actor
        self._text: list[str] = []
        self._calls: dict[int, _ChatCall] = {}
        self._finish_reason: str | None = None
        self._usage = Usage()

    def feed(self, chunk: Any) -> str | None:
        """Take one chunk; return the text it adds, if any."""
        usage = get(chunk, "usage")
        if usage is not None:
            self._usage = chat_usage(usage)
        delta_text: list[str] = []
        for choice in get(chunk, "choices", ()):
            if get(choice, "index", 0) != 0:
                continue
            reason = get(choice, "finish_reason")
            if reason is not None:
                self._finish_reason = reason
            delta = get(choice, "delta")
            if delta is None:
                continue
            for key in ("content", "refusal"):
                piece = get(delta, key)
                if isinstance(piece, str) and piece:
                    delta_text.append(piece)
            for tc in get(delta, "tool_calls", ()):
                self._feed_call(tc)
        if not delta_text:
            return None
        text = "".join(delta_text)
        self._text.append(text)
        return text

    def _feed_call(self, tc: Any) -> None:
        call = self._calls.setdefault(get(tc, "index", 0), _ChatCall())
        call_id = get(tc, "id")
        if call_id:
            call.id = call_id
        function = get(tc, "function")
        if function is None:
            return
        name = get(function, "name")
        # OpenAI sends the name once; some compatible servers repeat it in
        # every chunk and others split it, so append only what is new.
        if name and name != call.name:
            call.name += name
        arguments = get(function, "arguments")
        if arguments:
            call.arguments.append(arguments)

    def finish(self) -> tuple[list[Message], Usage]:
        """The reply as Messages, and its usage; raises if the stream broke off."""
        if self._finish_reason is None:
            raise ProviderStreamError("the stream ended before the reply finished")
        truncated = self._finish_reason == "length"
        out: list[Message] = []
        head = text_message(["".join(self._text)], self.actor)
        if head is not None:
            out.append(head)
        for index in sorted(self._calls):
            call = self._calls[index]
            raw = "".join(call.arguments)
            out.append(call_message(call.id, call.name, raw, self.actor, truncated=truncated))
        return stamped(out, self._finish_reason, self.actor), self._usage
