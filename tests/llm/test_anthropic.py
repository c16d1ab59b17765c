"""The Anthropic Messages API through the official anthropic SDK, on recorded payloads."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import anthropic
import pytest

from stalwart.core.message import ActionResult, Media, Message
from stalwart.llm import ProviderStreamError, Usage
from stalwart.llm._convert_anthropic import (
    AnthropicStreamAccumulator,
    from_anthropic_message,
    to_anthropic_messages,
    to_anthropic_tools,
)

from .conftest import TOOLS, Answer, Replay, payload_json, sse_events, weather_conversation

MODEL = "claude-haiku-4-5"


async def create(r: Replay, messages: list[Message], **kw: Any) -> Any:
    system, wire = to_anthropic_messages(messages)
    extra: dict[str, Any] = {"system": system} if system is not None else {}
    client = r.anthropic()
    return await client.messages.create(
        model=MODEL,
        max_tokens=1024,
        messages=wire,
        tools=to_anthropic_tools(TOOLS),
        **extra,
        **kw,
    )


async def test_text_reply(replay: Callable[..., Replay]) -> None:
    r = replay("anthropic_text.json")
    reply = await create(r, [Message.system("Be brief."), Message.user("Weather in Paris?")])

    assert r.requests[-1].url == "https://api.anthropic.com/v1/messages"
    sent = r.sent
    assert sent["system"] == "Be brief."
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}
    ]
    assert sent["tools"][0] == {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "input_schema": TOOLS[0].parameters,
    }
    assert sent["max_tokens"] == 1024

    messages, usage = from_anthropic_message(reply, actor="forecaster")
    (m,) = messages
    assert (m.role, m.actor, m.text) == (
        "assistant",
        "forecaster",
        "It is 18 °C and partly cloudy in Paris right now.",
    )
    # 24 uncached input tokens plus 1536 read from the prompt cache.
    assert usage == Usage(1560, 18)


async def test_single_tool_use(replay: Callable[..., Replay]) -> None:
    r = replay("anthropic_tool_use.json")
    messages, usage = from_anthropic_message(await create(r, [Message.user("Paris?")]))
    text, call = messages
    assert text.text == "I'll check the current weather in Paris."
    assert call.action_call is not None
    assert call.action_call.id == "toolu_01A7bC3dE9fG2hJ5kL8mN1pQ"
    assert (call.action_call.name, call.action_call.arguments) == ("get_weather", {"city": "Paris"})
    assert usage == Usage(612, 71)


async def test_parallel_tool_use(replay: Callable[..., Replay]) -> None:
    r = replay("anthropic_parallel_tool_use.json")
    messages, _ = from_anthropic_message(await create(r, [Message.user("Paris?")]))
    assert messages[0].text.startswith("I'll look up the weather")
    assert [(m.action_call.id, m.action_call.arguments) for m in messages if m.action_call] == [
        ("toolu_01B8cD4eF0gH3jK6lM9nP2qR", {"city": "Paris", "unit": "celsius"}),
        ("toolu_01C9dE5fG1hJ4kL7mN0pQ3rS", {"timezone": "Europe/Paris"}),
    ]
    assert len(messages) == 3


async def test_conversation_on_the_wire(replay: Callable[..., Replay]) -> None:
    convo = weather_conversation()
    time_call = convo[4]
    convo[-1] = Message.result(time_call, error=TimeoutError("clock service timed out"))
    convo.append(Message.user("Thanks! And tomorrow?"))
    r = replay("anthropic_text.json")
    await create(r, convo)
    sent = r.sent
    assert sent["system"] == "You are a concise assistant."
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "What's the weather and the time in Paris?"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look both up."},
                {
                    "type": "tool_use",
                    "id": "call_weather",
                    "name": "get_weather",
                    "input": {"city": "Paris", "unit": "celsius"},
                },
                {
                    "type": "tool_use",
                    "id": "call_time",
                    "name": "get_time",
                    "input": {"timezone": "Europe/Paris"},
                },
            ],
        },
        {
            # Both results in one user turn, before the user's next words.
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_weather",
                    "content": '{"temperature": 18, "sky": "partly cloudy"}',
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "call_time",
                    "content": "TimeoutError: clock service timed out",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks! And tomorrow?"},
            ],
        },
    ]


async def test_streamed_text(replay: Callable[..., Replay]) -> None:
    r = replay("anthropic_stream_text.sse")
    stream = await create(r, [Message.user("Paris?")], stream=True)
    acc = AnthropicStreamAccumulator(actor="forecaster")
    deltas = [d async for event in stream if (d := acc.feed(event)) is not None]
    assert r.sent["stream"] is True
    assert deltas[:3] == ["It", " is", " 18"]
    messages, usage = acc.finish()
    (m,) = messages
    assert m.text == "".join(deltas) == "It is 18 °C and partly cloudy in Paris."
    assert m.actor == "forecaster"
    assert usage == Usage(24 + 1536, 16)


async def test_streamed_tool_use(replay: Callable[..., Replay]) -> None:
    r = replay("anthropic_stream_tool_use.sse")
    stream = await create(r, [Message.user("Paris?")], stream=True)
    acc = AnthropicStreamAccumulator()
    deltas = [d async for event in stream if (d := acc.feed(event)) is not None]
    assert "".join(deltas) == "I'll look up the weather and the time in Paris."
    messages, usage = acc.finish()
    text, *calls = messages
    assert text.text == "".join(deltas)
    assert [(m.action_call.id, m.action_call.arguments) for m in calls if m.action_call] == [
        ("toolu_01D0eF6gH2jK5lM8nP1qR4sT", {"city": "Paris", "unit": "celsius"}),
        ("toolu_01E1fG7hJ3kL6mN9pQ2rS5tU", {"timezone": "Europe/Paris"}),
    ]
    assert len(calls) == 2
    assert usage == Usage(655, 138)


async def test_tool_use_cut_off_by_max_tokens_is_an_invalid_call(
    replay: Callable[..., Replay],
) -> None:
    r = replay("anthropic_stream_truncated_tool_use.sse")
    stream = await create(r, [Message.user("Write the report.")], stream=True)
    acc = AnthropicStreamAccumulator()
    async for event in stream:
        acc.feed(event)
    (m,), usage = acc.finish()
    assert m.action_call is not None
    assert m.action_call.name == "write_report"
    assert m.action_call.arguments == {}
    invalid = m.action_call.invalid
    assert invalid is not None
    assert "not valid JSON" in invalid
    assert "cut off by the output token limit" in invalid
    assert '{"title": "Paris weather", "body": "It is 18 °C and partly cl' in invalid
    assert usage == Usage(702, 32)

    # Sent back, the broken call has empty input and the error result reads the reason.
    error = Message.result(m, error_type="InvalidArguments", error_message=invalid)
    _, wire = to_anthropic_messages([Message.user("Write the report."), m, error])
    assert wire[1]["content"][0]["input"] == {}
    assert wire[2]["content"][0]["is_error"] is True


def test_stream_error_event_and_early_end_raise() -> None:
    acc = AnthropicStreamAccumulator()
    with pytest.raises(ProviderStreamError, match="overloaded_error: Overloaded"):
        acc.feed({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    acc = AnthropicStreamAccumulator()
    for event in sse_events("anthropic_stream_text.sse")[:-2]:
        acc.feed(event)
    with pytest.raises(ProviderStreamError, match="before the message finished"):
        acc.finish()


async def test_rate_limit_error(replay: Callable[..., Replay]) -> None:
    headers = {
        "request-id": "req_011CTQ7xK2mNp4rS6tV8wY0z",
        "retry-after": "12",
        "x-should-retry": "true",
        "anthropic-ratelimit-input-tokens-limit": "30000",
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": "2025-09-23T12:41:07Z",
    }
    r = replay(Answer("anthropic_error_429.json", 429, headers))
    with pytest.raises(anthropic.RateLimitError) as caught:
        await create(r, [Message.user("Paris?")])
    err = caught.value
    assert err.status_code == 429
    assert err.request_id == "req_011CTQ7xK2mNp4rS6tV8wY0z"
    assert err.response.headers["retry-after"] == "12"
    body = err.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "rate_limit_error"


async def test_invalid_request_error(replay: Callable[..., Replay]) -> None:
    r = replay(Answer("anthropic_error_400.json", 400, {"x-should-retry": "false"}))
    with pytest.raises(anthropic.BadRequestError) as caught:
        await create(r, [Message.user("Paris?")])
    assert caught.value.status_code == 400
    assert "unexpected `tool_use_id`" in caught.value.message


async def test_round_trip_through_the_sdk(replay: Callable[..., Replay]) -> None:
    convo = weather_conversation(actor="agent")
    _, wire = to_anthropic_messages(convo)
    body = payload_json("anthropic_parallel_tool_use.json")
    body["content"] = wire[1]["content"]
    r = replay(Answer("turn.json", body=body))
    back, _ = from_anthropic_message(await create(r, convo[:2]), actor="agent")
    assert [(m.role, m.actor, m.text, m.action_call) for m in back] == [
        (m.role, m.actor, m.text, m.action_call) for m in convo[2:5]
    ]


def test_late_system_message_is_user_text_and_turns_alternate() -> None:
    system, wire = to_anthropic_messages(
        [
            Message.system("Rule one."),
            Message.system("Rule two."),
            Message.user("Hi"),
            Message.assistant("Hello", actor="a"),
            Message.assistant("I'm b", actor="b"),
            Message.system("Three steps left."),
            Message.user("Go on"),
        ]
    )
    assert system == "Rule one.\n\nRule two."
    assert [(m["role"], [b["text"] for b in m["content"]]) for m in wire] == [
        ("user", ["Hi"]),
        ("assistant", ["Hello", "I'm b"]),
        ("user", ["Three steps left.", "Go on"]),
    ]


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def test_media_blocks() -> None:
    call = Message.call("render_chart", {}, id="chart")
    result = ActionResult("chart", "render_chart", {"points": 3})
    _, wire = to_anthropic_messages(
        [
            Message.user(
                "Compare:",
                Media("image/png", PNG),
                Media("image/jpeg", url="https://example.com/paris.jpg"),
                Media("application/pdf", b"%PDF-1.7"),
                Media("text/plain", b"notes: sunny"),
            ),
            call,
            Message("tool", "render_chart", (Media("image/png", PNG),), action_result=result),
        ]
    )
    png = base64.b64encode(PNG).decode()
    assert wire[0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/paris.jpg"}},
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(b"%PDF-1.7").decode(),
            },
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "notes: sunny"},
        },
    ]
    (block,) = wire[2]["content"]
    assert block["type"] == "tool_result"
    assert json.loads(block["content"][0]["text"]) == {"points": 3}
    assert block["content"][1]["source"]["media_type"] == "image/png"
    with pytest.raises(ValueError, match="Anthropic"):
        to_anthropic_messages([Message.user(Media("audio/wav", b"RIFF"))])
