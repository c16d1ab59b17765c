"""Chat Completions through the official openai SDK, on recorded payloads."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import openai
import pydantic
import pytest

from stalwart.core.message import ActionResult, Media, Message
from stalwart.llm import Usage
from stalwart.llm._convert_openai_chat import (
    ChatStreamAccumulator,
    from_chat_completion,
    to_chat_messages,
    to_chat_tools,
)

from .conftest import TOOLS, Answer, Replay, payload_json, weather_conversation

MODEL = "gpt-4o"


async def complete(r: Replay, messages: list[Message], **kw: Any) -> Any:
    client = r.openai()
    return await client.chat.completions.create(
        model=MODEL, messages=to_chat_messages(messages), tools=to_chat_tools(TOOLS), **kw
    )


async def test_text_reply(replay: Callable[..., Replay]) -> None:
    r = replay("openai_chat_text.json")
    convo = [Message.system("Be brief."), Message.user("Weather in Paris?")]
    completion = await complete(r, convo)

    sent = r.sent
    assert r.requests[-1].url == "https://api.openai.com/v1/chat/completions"
    assert sent["model"] == MODEL
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    assert sent["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": TOOLS[0].parameters,
        },
    }

    messages, usage = from_chat_completion(completion, actor="forecaster")
    assert len(messages) == 1
    (m,) = messages
    assert (m.role, m.actor) == ("assistant", "forecaster")
    assert m.text == "It is 18 °C and partly cloudy in Paris right now."
    assert not m.is_action_call
    assert usage == Usage(128, 15)


async def test_single_tool_call(replay: Callable[..., Replay]) -> None:
    r = replay("openai_chat_tool_call.json")
    messages, usage = from_chat_completion(await complete(r, [Message.user("Paris?")]))
    (m,) = messages
    assert m.action_call is not None
    assert m.action_call.id == "call_Qx7mB2nV9kLp4sRt1yHc8dWe"
    assert m.action_call.name == "get_weather"
    assert m.action_call.arguments == {"city": "Paris"}
    assert m.action_call.invalid is None
    assert usage == Usage(96, 16)


async def test_parallel_tool_calls_become_one_message_each(
    replay: Callable[..., Replay],
) -> None:
    r = replay("openai_chat_parallel_tool_calls.json")
    messages, _ = from_chat_completion(await complete(r, [Message.user("Paris?")]))
    calls = [m.action_call for m in messages]
    assert [(c.id, c.name, c.arguments) for c in calls if c is not None] == [
        ("call_Hn3pK8sD1fGq6wEr0tYu5iOa", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("call_Zb4xC7vN2mLk9jHg3fDs6aQw", "get_time", {"timezone": "Europe/Paris"}),
    ]
    assert len(messages) == 2


async def test_parallel_calls_go_back_in_one_assistant_turn(
    replay: Callable[..., Replay],
) -> None:
    r = replay("openai_chat_text.json")
    await complete(r, weather_conversation())
    sent = r.sent["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assistant = sent[2]
    assert assistant["content"] == "Let me look both up."
    assert assistant["tool_calls"] == [
        {
            "id": "call_weather",
            "type": "function",
            "function": {
                "name": "get_weather",
                "arguments": '{"city": "Paris", "unit": "celsius"}',
            },
        },
        {
            "id": "call_time",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"timezone": "Europe/Paris"}'},
        },
    ]
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": "call_weather",
        "content": '{"temperature": 18, "sky": "partly cloudy"}',
    }
    assert sent[4] == {"role": "tool", "tool_call_id": "call_time", "content": "14:05"}


async def test_malformed_arguments_give_an_invalid_call_not_an_error(
    replay: Callable[..., Replay],
) -> None:
    r = replay("openai_chat_malformed_arguments.json", "openai_chat_text.json")
    messages, _ = from_chat_completion(await complete(r, [Message.user("Paris?")]))
    bad, good = messages
    assert bad.action_call is not None and good.action_call is not None
    assert bad.action_call.arguments == {}
    assert bad.action_call.invalid is not None
    assert "not valid JSON" in bad.action_call.invalid
    assert '{"city": "Paris", "unit": "celsius"' in bad.action_call.invalid
    assert good.action_call.arguments == {"timezone": "Europe/Paris"}
    assert good.action_call.invalid is None

    # The engine answers the invalid call with an error result; the model
    # reads it, and the broken call goes back with empty arguments.
    convo = [
        Message.user("Paris?"),
        *messages,
        Message.result(bad, error_type="InvalidArguments", error_message=bad.action_call.invalid),
        Message.result(good, "14:05"),
    ]
    await complete(r, convo)
    sent = r.sent["messages"]
    assert sent[1]["content"] is None
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert sent[2]["content"] == f"InvalidArguments: {bad.action_call.invalid}"
    assert "is_error" not in sent[2]


async def test_streamed_text(replay: Callable[..., Replay]) -> None:
    r = replay("openai_chat_stream_text.sse")
    stream = await complete(
        r, [Message.user("Paris?")], stream=True, stream_options={"include_usage": True}
    )
    acc = ChatStreamAccumulator(actor="forecaster")
    deltas = [d async for chunk in stream if (d := acc.feed(chunk)) is not None]
    assert r.sent["stream"] is True
    assert r.sent["stream_options"] == {"include_usage": True}
    assert deltas[:3] == ["It", " is", " 18"]
    messages, usage = acc.finish()
    (m,) = messages
    assert m.text == "".join(deltas) == "It is 18 °C and partly cloudy in Paris."
    assert m.actor == "forecaster"
    assert usage == Usage(128, 12)


async def test_streamed_tool_calls(replay: Callable[..., Replay]) -> None:
    r = replay("openai_chat_stream_tool_calls.sse")
    stream = await complete(r, [Message.user("Paris?")], stream=True)
    acc = ChatStreamAccumulator()
    deltas = [acc.feed(chunk) async for chunk in stream]
    assert deltas == [None] * len(deltas)
    messages, usage = acc.finish()
    assert [
        (m.action_call.id, m.action_call.name, m.action_call.arguments)
        for m in messages
        if m.action_call
    ] == [
        ("call_Vb7nM2qW5eRt8yUi1oPa4sDf", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("call_Gh3jK6lZ9xCv2bNm5qWe8rTy", "get_time", {"timezone": "Europe/Paris"}),
    ]
    assert len(messages) == 2
    assert usage == Usage(141, 52)


async def test_rate_limit_error(replay: Callable[..., Replay]) -> None:
    headers = {
        "x-request-id": "req_5c2f1a7e9b3d4c6e8f0a1b2c3d4e5f6a",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "368",
        "x-ratelimit-reset-tokens": "1.632s",
    }
    r = replay(Answer("openai_error_429.json", 429, headers))
    with pytest.raises(openai.RateLimitError) as caught:
        await complete(r, [Message.user("Paris?")])
    err = caught.value
    assert err.status_code == 429
    assert err.code == "rate_limit_exceeded"
    assert err.type == "tokens"
    assert err.request_id == "req_5c2f1a7e9b3d4c6e8f0a1b2c3d4e5f6a"
    assert "Please try again in 1.632s" in err.message


async def test_rate_limit_is_retried_by_the_sdk(replay: Callable[..., Replay]) -> None:
    r = replay(
        Answer("openai_error_429.json", 429, {"retry-after-ms": "1"}), "openai_chat_text.json"
    )
    client = r.openai(max_retries=1)
    completion = await client.chat.completions.create(
        model=MODEL, messages=to_chat_messages([Message.user("Paris?")])
    )
    assert len(r.requests) == 2
    assert r.requests[0].body == r.requests[1].body
    assert from_chat_completion(completion)[0][0].text.startswith("It is 18 °C")


async def test_invalid_request_error(replay: Callable[..., Replay]) -> None:
    r = replay(Answer("openai_error_400.json", 400))
    with pytest.raises(openai.BadRequestError) as caught:
        await complete(r, [Message.user("Paris?")])
    assert caught.value.status_code == 400
    assert caught.value.param == "messages.[2].role"
    assert caught.value.code is None
    assert "must be a response to a preceeding message" in caught.value.message


async def test_round_trip_through_the_sdk(replay: Callable[..., Replay]) -> None:
    """Messages → wire → an SDK-parsed response of that turn → the same Messages."""
    convo = weather_conversation(actor="agent")
    wire = to_chat_messages(convo)
    body = payload_json("openai_chat_parallel_tool_calls.json")
    body["choices"][0]["message"] = wire[2]
    r = replay(Answer("turn.json", body=body))
    back, _ = from_chat_completion(await complete(r, convo[:2]), actor="agent")
    original = convo[2:5]
    assert [(m.role, m.actor, m.text, m.action_call) for m in back] == [
        (m.role, m.actor, m.text, m.action_call) for m in original
    ]


def test_assistant_turns_merge_per_actor() -> None:
    convo = [
        Message.user("go"),
        Message.assistant("thinking", actor="a"),
        Message.call("get_time", {"timezone": "UTC"}, id="c1", actor="a"),
        Message.assistant("me too", actor="b"),
        Message.call("get_time", {"timezone": "UTC"}, id="c2", actor="b"),
        Message.result("c1", "1", name="get_time"),
        Message.result("c2", "2", name="get_time"),
    ]
    wire = to_chat_messages(convo)
    assert [(m["role"], m.get("content")) for m in wire] == [
        ("user", "go"),
        ("assistant", "thinking"),
        ("assistant", "me too"),
        ("tool", "1"),
        ("tool", "2"),
    ]
    assert [tc["id"] for tc in wire[1]["tool_calls"]] == ["c1"]
    assert [tc["id"] for tc in wire[2]["tool_calls"]] == ["c2"]


def test_calls_without_text_send_null_content() -> None:
    wire = to_chat_messages([Message.call("get_time", {"timezone": "UTC"}, id="c1")])
    assert wire == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"timezone": "UTC"}'},
                }
            ],
        }
    ]


def test_orphan_result_is_refused() -> None:
    with pytest.raises(ValueError, match="call id 'nope'"):
        to_chat_messages([Message.user("hi"), Message.result("nope", 1, name="get_time")])


class Forecast(pydantic.BaseModel):
    city: str
    temperature: float


@dataclasses.dataclass
class Clock:
    timezone: str
    time: str


def test_results_are_json_and_errors_read_as_text() -> None:
    a = Message.call("get_weather", {"city": "Paris"}, id="a")
    b = Message.call("get_time", {"timezone": "Europe/Paris"}, id="b")
    c = Message.call("get_weather", {"city": "Atlantis"}, id="c")
    wire = to_chat_messages(
        [
            a,
            b,
            c,
            Message.result(a, Forecast(city="Paris", temperature=18.5)),
            Message.result(b, Clock("Europe/Paris", "14:05")),
            Message.result(c, error=LookupError("no such city: Atlantis")),
        ]
    )
    contents = [m["content"] for m in wire[1:]]
    assert json.loads(contents[0]) == {"city": "Paris", "temperature": 18.5}
    assert json.loads(contents[1]) == {"timezone": "Europe/Paris", "time": "14:05"}
    assert contents[2] == "LookupError: no such city: Atlantis"


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


async def test_media_on_the_wire(replay: Callable[..., Replay]) -> None:
    call = Message.call("render_chart", {}, id="chart")
    result = ActionResult("chart", "render_chart", "rendered")
    chart = Message("tool", "render_chart", (Media("image/png", PNG),), action_result=result)
    convo = [
        Message.user(
            "Compare these:",
            Media("image/png", PNG),
            Media("image/jpeg", url="https://example.com/paris.jpg"),
            Media("application/pdf", b"%PDF-1.7"),
            Media("audio/wav", b"RIFF"),
        ),
        call,
        chart,
    ]
    r = replay("openai_chat_text.json")
    await complete(r, convo)
    sent = r.sent["messages"]
    b64png = base64.b64encode(PNG).decode()
    assert sent[0]["content"] == [
        {"type": "text", "text": "Compare these:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64png}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/paris.jpg"}},
        {
            "type": "file",
            "file": {
                "filename": "file.pdf",
                "file_data": "data:application/pdf;base64,"
                + base64.b64encode(b"%PDF-1.7").decode(),
            },
        },
        {
            "type": "input_audio",
            "input_audio": {"data": base64.b64encode(b"RIFF").decode(), "format": "wav"},
        },
    ]
    # Tool messages take no images: the image follows in a user message.
    assert sent[2] == {"role": "tool", "tool_call_id": "chart", "content": "rendered"}
    assert sent[3]["role"] == "user"
    assert sent[3]["content"][0]["text"] == "Media returned by render_chart (call chart):"
    assert sent[3]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_media_a_provider_cannot_take_is_refused() -> None:
    with pytest.raises(ValueError, match="audio/wav media given as a URL"):
        to_chat_messages([Message.user(Media("audio/wav", url="https://example.com/a.wav"))])
    with pytest.raises(ValueError, match="assistant"):
        to_chat_messages([Message.assistant(Media("image/png", PNG))])
