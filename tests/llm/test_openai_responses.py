"""The OpenAI Responses API through the official openai SDK, on recorded payloads."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import openai
import pytest

from stalwart.core.message import ActionResult, Media, Message
from stalwart.llm import ProviderStreamError, Usage
from stalwart.llm._convert_openai_responses import (
    ResponsesStreamAccumulator,
    from_response,
    to_responses_input,
    to_responses_tools,
)

from .conftest import TOOLS, Answer, Replay, payload_json, sse_events, weather_conversation

MODEL = "gpt-4.1"


async def respond(r: Replay, messages: list[Message], **kw: Any) -> Any:
    client = r.openai()
    return await client.responses.create(
        model=MODEL, input=to_responses_input(messages), tools=to_responses_tools(TOOLS), **kw
    )


async def test_text_reply(replay: Callable[..., Replay]) -> None:
    r = replay("openai_responses_text.json")
    response = await respond(r, [Message.system("Be brief."), Message.user("Weather in Paris?")])

    assert r.requests[-1].url == "https://api.openai.com/v1/responses"
    sent = r.sent
    assert sent["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    assert sent["tools"][0] == {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": TOOLS[0].parameters,
        "strict": False,
    }

    messages, usage = from_response(response, actor="forecaster")
    (m,) = messages
    assert (m.role, m.actor, m.text) == (
        "assistant",
        "forecaster",
        "It is 18 °C and partly cloudy in Paris right now.",
    )
    assert usage == Usage(131, 15)


async def test_single_tool_call(replay: Callable[..., Replay]) -> None:
    r = replay("openai_responses_tool_call.json")
    messages, usage = from_response(await respond(r, [Message.user("Paris?")]))
    (m,) = messages
    assert m.action_call is not None
    # The call id pairs results; the item id (fc_...) is not needed again.
    assert m.action_call.id == "call_Pq2wE5rT8yU1iO4pAs7dFg0h"
    assert (m.action_call.name, m.action_call.arguments) == ("get_weather", {"city": "Paris"})
    assert usage == Usage(99, 17)


async def test_parallel_tool_calls(replay: Callable[..., Replay]) -> None:
    r = replay("openai_responses_parallel_tool_calls.json")
    messages, usage = from_response(await respond(r, [Message.user("Paris?")]))
    assert [
        (m.action_call.id, m.action_call.name, m.action_call.arguments)
        for m in messages
        if m.action_call
    ] == [
        ("call_Jk4lZ7xC0vB3nM6qW9eR2tYu", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("call_Xc5vB8nM1qW4eR7tY0uI3oPa", "get_time", {"timezone": "Europe/Paris"}),
    ]
    assert len(messages) == 2
    assert usage == Usage(144, 57)


async def test_conversation_on_the_wire(replay: Callable[..., Replay]) -> None:
    r = replay("openai_responses_text.json")
    await respond(r, weather_conversation())
    assert r.sent["input"] == [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "What's the weather and the time in Paris?"},
        {"role": "assistant", "content": "Let me look both up."},
        {
            "type": "function_call",
            "call_id": "call_weather",
            "name": "get_weather",
            "arguments": '{"city": "Paris", "unit": "celsius"}',
        },
        {
            "type": "function_call",
            "call_id": "call_time",
            "name": "get_time",
            "arguments": '{"timezone": "Europe/Paris"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_weather",
            "output": '{"temperature": 18, "sky": "partly cloudy"}',
        },
        {"type": "function_call_output", "call_id": "call_time", "output": "14:05"},
    ]


async def test_malformed_arguments(replay: Callable[..., Replay]) -> None:
    r = replay("openai_responses_malformed_arguments.json", "openai_responses_text.json")
    messages, _ = from_response(await respond(r, [Message.user("Paris?")]))
    (m,) = messages
    assert m.action_call is not None
    assert m.action_call.arguments == {}
    assert m.action_call.invalid is not None
    assert "not valid JSON" in m.action_call.invalid
    assert '{"city": "Paris", unit: "celsius"}' in m.action_call.invalid

    error = Message.result(m, error_type="InvalidArguments", error_message=m.action_call.invalid)
    await respond(r, [Message.user("Paris?"), m, error])
    call_item, output_item = r.sent["input"][1:]
    assert call_item["arguments"] == "{}"
    assert output_item["output"] == f"InvalidArguments: {m.action_call.invalid}"


async def test_streamed_text(replay: Callable[..., Replay]) -> None:
    r = replay("openai_responses_stream_text.sse")
    stream = await respond(r, [Message.user("Paris?")], stream=True)
    acc = ResponsesStreamAccumulator(actor="forecaster")
    deltas = [d async for event in stream if (d := acc.feed(event)) is not None]
    assert r.sent["stream"] is True
    assert len(deltas) == 10
    messages, usage = acc.finish()
    (m,) = messages
    assert m.text == "".join(deltas) == "It is 18 °C and partly cloudy in Paris."
    assert m.actor == "forecaster"
    assert usage == Usage(131, 12)


async def test_streamed_tool_calls(replay: Callable[..., Replay]) -> None:
    r = replay("openai_responses_stream_tool_calls.sse")
    stream = await respond(r, [Message.user("Paris?")], stream=True)
    acc = ResponsesStreamAccumulator()
    deltas = [acc.feed(event) async for event in stream]
    assert len(deltas) == 25
    assert all(d is None for d in deltas)
    messages, usage = acc.finish()
    assert [(m.action_call.id, m.action_call.arguments) for m in messages if m.action_call] == [
        ("call_Bn7mQ0wE3rT6yU9iO2pAs5dF", {"city": "Paris", "unit": "celsius"}),
        ("call_Kl1zX4cV7bN0mQ3wE6rT9yUi", {"timezone": "Europe/Paris"}),
    ]
    assert usage == Usage(144, 52)


def test_stream_failure_events_raise() -> None:
    acc = ResponsesStreamAccumulator()
    failed = {
        "type": "response.failed",
        "sequence_number": 3,
        "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
    }
    with pytest.raises(ProviderStreamError, match="server_error: boom"):
        acc.feed(failed)
    with pytest.raises(ProviderStreamError, match="rate_limit_exceeded"):
        acc.feed(
            {
                "type": "error",
                "sequence_number": 1,
                "code": "rate_limit_exceeded",
                "message": "slow down",
                "param": None,
            }
        )


def test_stream_cut_short_raises() -> None:
    acc = ResponsesStreamAccumulator()
    for event in sse_events("openai_responses_stream_text.sse")[:-1]:
        acc.feed(event)
    with pytest.raises(ProviderStreamError, match="before the response completed"):
        acc.finish()


async def test_round_trip_through_the_sdk(replay: Callable[..., Replay]) -> None:
    convo = weather_conversation(actor="agent")
    items = to_responses_input(convo)[2:5]
    text, *calls = items
    body = payload_json("openai_responses_parallel_tool_calls.json")
    body["output"] = [
        {
            "id": "msg_1",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text["content"], "annotations": []}],
        },
        *({**c, "id": f"fc_{i}", "status": "completed"} for i, c in enumerate(calls)),
    ]
    r = replay(Answer("turn.json", body=body))
    back, _ = from_response(await respond(r, convo[:2]), actor="agent")
    assert [(m.role, m.actor, m.text, m.action_call) for m in back] == [
        (m.role, m.actor, m.text, m.action_call) for m in convo[2:5]
    ]


def test_truncated_response_marks_broken_calls() -> None:
    body = payload_json("openai_responses_malformed_arguments.json")
    body["status"] = "incomplete"
    body["incomplete_details"] = {"reason": "max_output_tokens"}
    (m,), _ = from_response(body)
    assert m.action_call is not None and m.action_call.invalid is not None
    assert "cut off by the output token limit" in m.action_call.invalid


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def test_media_items() -> None:
    call = Message.call("render_chart", {}, id="chart")
    result = ActionResult("chart", "render_chart", "rendered")
    items = to_responses_input(
        [
            Message.user(
                "Compare:",
                Media("image/png", PNG),
                Media("application/pdf", url="https://example.com/report.pdf"),
                Media("application/pdf", b"%PDF-1.7"),
            ),
            call,
            Message("tool", "render_chart", (Media("image/png", PNG),), action_result=result),
        ]
    )
    png_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert items[0]["content"] == [
        {"type": "input_text", "text": "Compare:"},
        {"type": "input_image", "image_url": png_url, "detail": "auto"},
        {"type": "input_file", "file_url": "https://example.com/report.pdf"},
        {
            "type": "input_file",
            "filename": "file.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.7").decode(),
        },
    ]
    assert items[2] == {
        "type": "function_call_output",
        "call_id": "chart",
        "output": [
            {"type": "input_text", "text": "rendered"},
            {"type": "input_image", "image_url": png_url, "detail": "auto"},
        ],
    }
    with pytest.raises(ValueError, match="Responses"):
        to_responses_input([Message.user(Media("audio/wav", b"RIFF"))])


async def test_errors_surface_as_sdk_exceptions(replay: Callable[..., Replay]) -> None:
    r = replay(Answer("openai_error_400.json", 400), Answer("openai_error_429.json", 429))
    with pytest.raises(openai.BadRequestError):
        await respond(r, [Message.user("Paris?")])
    with pytest.raises(openai.RateLimitError):
        await respond(r, [Message.user("Paris?")])
