"""Messages to and from OpenAI's Responses API.

Requests are built as plain JSON-shaped dicts, which the SDK sends as they are;
responses are read with :func:`~._common.get`, so SDK objects and recorded
JSON convert alike and the ``openai`` package is never imported here.

The Responses API has no role messages: text, function calls and their outputs are
separate input items, which is already the shape of a Stalwart conversation.
The whole conversation is sent each time (no ``previous_response_id``): the
conversation a run replays is the one in its ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import ProviderStreamError
from ..core.message import Media, Message, Text
from ._common import (
    arguments_json,
    call_message,
    call_of,
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
    "ResponsesStreamAccumulator",
    "from_response",
    "from_responses_output",
    "responses_usage",
    "to_responses_input",
    "to_responses_tools",
]


# -- Responses API: request --------------------------------------------------------


def to_responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """``tools`` for the Responses API.

    ``strict`` is set to false explicitly: the Responses API otherwise turns
    strict mode on, which refuses schemas with optional parameters.
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        spec: dict[str, Any] = {"type": "function", "name": tool.name}
        if tool.description:
            spec["description"] = tool.description
        spec["parameters"] = tool.parameters
        spec["strict"] = False
        out.append(spec)
    return out


def to_responses_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``input`` items for the Responses API (the whole conversation, stateless)."""
    out: list[dict[str, Any]] = []
    for group in grouped(messages):
        if group.kind == "system":
            text = only_text(group.messages[0], "an OpenAI Responses system message")
            out.append({"role": "system", "content": text})
        elif group.kind == "user":
            out.append({"role": "user", "content": _responses_user_content(group.messages[0])})
        elif group.kind == "assistant":
            for m in group.messages:
                if m.action_call is not None:
                    call = call_of(m)
                    out.append(
                        {
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.name,
                            "arguments": arguments_json(m),
                        }
                    )
                else:
                    text = only_text(m, "an OpenAI Responses assistant message")
                    if text:
                        out.append({"role": "assistant", "content": text})
        else:
            for m in group.messages:
                text, media = result_content(m)
                output: str | list[dict[str, Any]] = text
                if media:
                    output = [{"type": "input_text", "text": text}]
                    output.extend(_responses_media(x) for x in media)
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": result_of(m).call_id,
                        "output": output,
                    }
                )
    return out


def _responses_user_content(message: Message) -> str | list[dict[str, Any]]:
    if not message.media and len(message.parts) <= 1:
        return message.text
    return [
        {"type": "input_text", "text": p.text} if isinstance(p, Text) else _responses_media(p)
        for p in message.parts
    ]


def _responses_media(media: Media) -> dict[str, Any]:
    if media.mime_type.startswith("image/"):
        return {"type": "input_image", "image_url": data_url(media), "detail": "auto"}
    if media.mime_type.startswith("audio/"):
        raise unsupported(media, "the OpenAI Responses API")
    if media.url is not None:
        return {"type": "input_file", "file_url": media.url}
    return {"type": "input_file", "filename": filename_for(media), "file_data": data_url(media)}


# -- Responses API: response -------------------------------------------------------


def responses_usage(usage: Any) -> Usage:
    """Usage of a response (``input_tokens`` already include cached ones)."""
    if usage is None:
        return Usage()
    return Usage(get(usage, "input_tokens", 0), get(usage, "output_tokens", 0))


def from_responses_output(
    output: Sequence[Any], *, actor: str = "assistant", truncated: bool = False
) -> list[Message]:
    """The Messages of a response's ``output`` items, in their order.

    Items Stalwart has no Message for (reasoning, built-in tool calls) are
    left out.
    """
    out: list[Message] = []
    for item in output:
        kind = get(item, "type")
        if kind == "message":
            texts = [
                get(c, "text", "") if get(c, "type") == "output_text" else get(c, "refusal", "")
                for c in get(item, "content", ())
            ]
            m = text_message(texts, actor)
            if m is not None:
                out.append(m)
        elif kind == "function_call":
            cut = truncated or get(item, "status") == "incomplete"
            out.append(
                call_message(
                    get(item, "call_id", ""),
                    get(item, "name", ""),
                    get(item, "arguments"),
                    actor,
                    truncated=cut,
                )
            )
    return out


def from_response(response: Any, *, actor: str = "assistant") -> tuple[list[Message], Usage]:
    """The Messages and usage of a Responses API response."""
    reason = get(get(response, "incomplete_details", {}), "reason")
    truncated = get(response, "status") == "incomplete" and reason == "max_output_tokens"
    messages = from_responses_output(get(response, "output", ()), actor=actor, truncated=truncated)
    # The Responses API has a status, not a finish reason: "completed", or
    # the reason it is incomplete ("max_output_tokens", "content_filter").
    finish = reason if get(response, "status") == "incomplete" else get(response, "status")
    return stamped(messages, finish, actor), responses_usage(get(response, "usage"))


class ResponsesStreamAccumulator:
    """Folds Responses API stream events into text deltas and the final Messages.

    The final ``response.completed`` (or ``response.incomplete``) event holds
    the whole response, so the Messages are read from it; a ``response.failed``
    or ``error`` event raises :class:`ProviderStreamError`, which the SDK does
    not do because the HTTP status was 200.
    """

    def __init__(self, *, actor: str = "assistant") -> None:
        self.actor = actor
        self._response: Any = None

    def feed(self, event: Any) -> str | None:
        """Take one event; return the text it adds, if any."""
        kind = get(event, "type")
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = get(event, "delta", "")
            return delta if isinstance(delta, str) and delta else None
        if kind in ("response.completed", "response.incomplete"):
            self._response = get(event, "response")
        elif kind == "response.failed":
            error = get(get(event, "response", {}), "error", {})
            raise ProviderStreamError(
                get(error, "message", "the response failed"), get(error, "code")
            )
        elif kind == "error":
            raise ProviderStreamError(get(event, "message", "stream error"), get(event, "code"))
        return None

    def finish(self) -> tuple[list[Message], Usage]:
        """The reply as Messages, and its usage; raises if the stream broke off."""
        if self._response is None:
            raise ProviderStreamError("the stream ended before the response completed")
        return from_response(self._response, actor=self.actor)
