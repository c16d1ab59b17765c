"""Provider policies through the official SDKs, on recorded payloads, inside real runs.

Each test runs a model as a step of a run (``ctx.call(model, observations=...,
options=[...])``), so what is checked is what a user gets: the JSON the SDK put
on the wire, the messages the step returns and records, the tool calls the
engine ran, the token deltas a listener saw, and the errors a run fails with.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

import stalwart as sw
from stalwart import llm
from stalwart.core import codec
from stalwart.core.message import Message
from stalwart.core.policy import as_policy
from stalwart.core.recorded import error_from_json

from .conftest import Answer, Replay, payload, payload_json
from .weather import (
    KINDS,
    MODELS,
    RAN,
    TOOLS,
    ask,
    get_time,
    get_weather,
    make_model,
    only,
    payload_for,
)


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


# How each API says a reply ended normally.
FINISHED = {"chat": "stop", "responses": "completed", "anthropic": "end_turn"}


def sent_tools(kind: str, sent: dict[str, Any]) -> list[str]:
    if kind == "chat":
        return [t["function"]["name"] for t in sent["tools"]]
    return [t["name"] for t in sent["tools"]]


# -- the request and the reply -------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_options_become_tools_and_the_reply_carries_usage(
    kind: str, replay: Callable[..., Replay]
) -> None:
    r = replay(payload_for(kind, "text"))
    model = make_model(kind, r)
    convo = [Message.system("Be brief."), Message.user("Weather in Paris?")]
    (reply,) = await ask(model, convo, TOOLS)

    sent = r.sent
    assert sent["model"] == MODELS[kind]
    assert sent_tools(kind, sent) == ["get_weather", "get_time"]
    assert "stream" not in sent
    if kind == "chat":
        assert sent["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ]
        assert sent["tools"][0] == {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city.",
                "parameters": get_weather.parameters,
            },
        }
    elif kind == "responses":
        assert sent["input"][0] == {"role": "system", "content": "Be brief."}
        assert sent["tools"][1]["parameters"] == get_time.parameters
    else:
        assert sent["system"] == "Be brief."
        assert sent["max_tokens"] == llm.anthropic.__kwdefaults__["max_tokens"]
        assert sent["tools"][0]["input_schema"] == get_weather.parameters

    assert reply.text.startswith("It is 18 °C")
    assert (
        reply.actor
        == model.name
        == f"{'anthropic' if kind == 'anthropic' else 'openai'}:" + (MODELS[kind])
    )
    assert reply.meta is not None
    assert reply.meta["model"] == MODELS[kind]
    usage = llm.Usage.from_dict(reply.meta["usage"])
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    # The provider's own finish reason, for tracing (gen_ai.response.finish_reasons).
    assert reply.meta["finish_reason"] == FINISHED[kind]


@pytest.mark.parametrize("kind", KINDS)
async def test_parallel_calls_are_run_by_the_runtime_and_sent_back(
    kind: str, replay: Callable[..., Replay]
) -> None:
    r = replay(payload_for(kind, "parallel_tool_calls"), payload_for(kind, "text"))
    model = make_model(kind, r)
    convo = await ask(model, [Message.user("Weather and time in Paris?")], TOOLS, rounds=2)

    calls = only(convo, lambda m: m.action_call is not None)
    results = only(convo, lambda m: m.action_result is not None)
    assert [c.action_call.name for c in calls if c.action_call] == ["get_weather", "get_time"]
    assert [r.action_result.call_id for r in results if r.action_result] == [
        c.action_call.id for c in calls if c.action_call
    ]
    assert sorted(name for name, _ in RAN) == ["get_time", "get_weather"]
    assert convo[-1].text.startswith("It is 18 °C")
    # Usage sits on the first message of each reply, once per call.
    assert sum(1 for m in convo if m.meta and "usage" in m.meta) == 2

    second = r.requests[1].json()
    if kind == "chat":
        tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
        assert [
            json.loads(m["content"]) if m["content"][0] == "{" else m["content"]
            for m in tool_messages
        ] == [
            {"temperature": 18, "unit": "celsius", "sky": "partly cloudy"},
            "14:05",
        ]
        assert len(second["messages"][1]["tool_calls"]) == 2  # one assistant turn
    elif kind == "responses":
        outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
        assert [o["output"] for o in outputs][1] == "14:05"
    else:
        blocks = second["messages"][-1]["content"]
        assert [b["type"] for b in blocks] == ["tool_result", "tool_result"]
        assert blocks[1]["content"] == "14:05"


async def test_params_go_into_every_request(replay: Callable[..., Replay]) -> None:
    r = replay("openai_chat_text.json", "anthropic_text.json")
    chat = llm.openai("gpt-4o", client=r.openai(), temperature=0.2, tool_choice="auto")
    await ask(chat, [Message.user("Paris?")], TOOLS)
    assert (r.sent["temperature"], r.sent["tool_choice"]) == (0.2, "auto")
    claude = llm.anthropic(
        "claude-haiku-4-5", client=r.anthropic(), max_tokens=256, system="House rules."
    )
    await ask(claude, [Message.system("Be brief."), Message.user("Paris?")])
    assert r.sent["max_tokens"] == 256
    assert r.sent["system"] == "House rules.\n\nBe brief."
    assert "tools" not in r.sent  # no options, no tools


async def test_an_empty_reply_still_carries_its_usage(replay: Callable[..., Replay]) -> None:
    body = payload_json("anthropic_text.json")
    body["content"] = []
    r = replay(Answer("empty.json", body=body))
    (reply,) = await ask(make_model("anthropic", r), [Message.user("Say nothing.")])
    assert reply.parts == () and reply.action_call is None
    assert reply.meta is not None and reply.meta["usage"]["output_tokens"] > 0


# -- streaming -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_deltas_stream_live_and_the_step_records_the_whole_reply(
    kind: str, replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay(payload_for(kind, "stream_text"))
    model = make_model(kind, r, stream=True)

    @sw.policy
    async def forecast(ctx: sw.Context, question: str) -> list[Message]:
        return await ctx.call(model, observations=[Message.user(question)], options=TOOLS)

    async with sw.Runner(sqlite_url) as runner:
        events = [e async for e in runner.stream(forecast, question="Paris?", run_id="s")]
        steps = {s.key: s for s in await runner.steps("s")}

    assert r.sent["stream"] is True
    if kind == "chat":
        assert r.sent["stream_options"] == {"include_usage": True}
    assert sent_tools(kind, r.sent) == ["get_weather", "get_time"]

    deltas = [e for e in events if isinstance(e, sw.TextDelta)]
    assert len(deltas) > 3
    assert {e.key for e in deltas} == {"1"}  # the model call's step
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("CallStarted") < kinds.index("TextDelta")
    assert kinds.index("CallFinished") > len(kinds) - 1 - kinds[::-1].index("TextDelta")
    text = "".join(e.text for e in deltas)
    assert text == "It is 18 °C and partly cloudy in Paris."

    finished = events[-1]
    assert isinstance(finished, sw.RunFinished) and finished.status == "succeeded"
    (recorded,) = codec.loads(steps["1"].output or "null")
    assert recorded.text == text  # the whole message, not the deltas
    assert recorded.meta["usage"]["output_tokens"] > 0
    assert recorded.meta["finish_reason"] == FINISHED[kind]  # recorded: replay traces it too


@pytest.mark.parametrize("kind", KINDS)
async def test_streamed_tool_calls_are_run(kind: str, replay: Callable[..., Replay]) -> None:
    r = replay(payload_for(kind, "stream_tool_calls"))
    model = make_model(kind, r, stream=True)
    out = await ask(model, [Message.user("Weather and time in Paris?")], TOOLS)
    assert sorted(name for name, _ in RAN) == ["get_time", "get_weather"]
    assert len(only(out, lambda m: m.action_result is not None)) == 2


@dataclasses.dataclass
class Spliced(Answer):
    """A recorded stream whose tail, from ``at`` on, is replaced: cut off, or an error event."""

    at: bytes = b""
    tail: bytes = b""

    def content(self) -> bytes:
        body = payload(self.name)
        return body[: body.index(self.at)] + self.tail


async def test_a_stream_that_breaks_off_fails_the_step(replay: Callable[..., Replay]) -> None:
    r = replay(Spliced("anthropic_stream_text.sse", at=b"event: message_delta"))
    with pytest.raises(llm.ProviderUnavailable, match="the stream failed: the stream ended"):
        await ask(make_model("anthropic", r, stream=True), [Message.user("Paris?")])


OVERLOADED = (
    b'event: error\ndata: {"type": "error", "error": '
    b'{"type": "overloaded_error", "message": "Overloaded"}}\n\n'
)
SERVER_ERROR = (
    b'data: {"error": {"message": "The server had an error while processing your request.", '
    b'"type": "server_error", "code": null}}\n\n'
)


@pytest.mark.parametrize(
    ("kind", "answer", "says"),
    [
        (
            "anthropic",
            Spliced("anthropic_stream_text.sse", at=b"event: content_block_delta", tail=OVERLOADED),
            "the stream failed: Overloaded (code overloaded_error)",
        ),
        (
            "chat",
            Spliced("openai_chat_stream_text.sse", at=b'data: {"id"', tail=SERVER_ERROR),
            "the stream failed: The server had an error while processing your request.",
        ),
    ],
)
async def test_an_error_event_in_a_stream_fails_the_step_clearly(
    kind: str, answer: Answer, says: str, replay: Callable[..., Replay]
) -> None:
    r = replay(answer)
    with pytest.raises(llm.ProviderUnavailable) as caught:
        await ask(make_model(kind, r, stream=True), [Message.user("Paris?")])
    assert says in str(caught.value)
    assert "HTTP 200" not in str(caught.value)


# -- retries and errors --------------------------------------------------------------


async def test_rate_limits_are_retried_by_the_sdk_then_succeed(
    replay: Callable[..., Replay],
) -> None:
    busy = Answer("openai_error_429.json", 429, {"retry-after-ms": "1"})
    r = replay(busy, busy, "openai_chat_text.json")
    (reply,) = await ask(make_model("chat", r, retries=2), [Message.user("Paris?")], TOOLS)
    assert reply.text.startswith("It is 18 °C")
    assert len(r.requests) == 3
    assert r.requests[0].body == r.requests[2].body  # the same request, re-sent


async def test_transient_server_errors_are_retried(replay: Callable[..., Replay]) -> None:
    overloaded = Answer(
        "overloaded.json",
        529,
        {"retry-after-ms": "1"},
        body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    r = replay(overloaded, "anthropic_text.json")
    (reply,) = await ask(make_model("anthropic", r, retries=1), [Message.user("Paris?")])
    assert reply.text.startswith("It is 18 °C")
    assert len(r.requests) == 2


async def test_connection_errors_are_retried(replay: Callable[..., Replay]) -> None:
    r = replay("openai_chat_text.json")
    handle = r._handler
    failures = [True]

    def flaky(http: Any) -> Callable[[Any], Any]:
        inner = handle(http)

        def answer(request: Any) -> Any:
            if failures:
                failures.pop()
                raise http.ConnectError("connection refused", request=request)
            return inner(request)

        return answer

    r._handler = flaky  # type: ignore[method-assign]
    client = r.openai(max_retries=1)
    model = llm.openai("gpt-4o", client=client)
    (reply,) = await ask(model, [Message.user("Paris?")])
    assert reply.text.startswith("It is 18 °C")
    assert not failures


async def test_a_rate_limit_that_lasts_fails_clearly(replay: Callable[..., Replay]) -> None:
    busy = Answer("openai_error_429.json", 429, {"retry-after-ms": "1", "x-request-id": "req_1"})
    r = replay(busy, busy, busy)
    with pytest.raises(llm.RateLimited) as caught:
        await ask(make_model("chat", r, retries=2), [Message.user("Paris?")])
    err = caught.value
    assert len(r.requests) == 3
    assert err.status == 429 and err.code == "rate_limit_exceeded"
    assert "was rate limited after 2 retries" in str(err)
    assert "Please try again in 1.632s" in str(err)
    assert "request id req_1" in str(err)


@pytest.mark.parametrize("kind", ["chat", "anthropic"])
async def test_an_invalid_request_fails_at_once_with_the_providers_message(
    kind: str, replay: Callable[..., Replay], sqlite_url: str
) -> None:
    name = "openai_error_400.json" if kind == "chat" else "anthropic_error_400.json"
    r = replay(Answer(name, 400), "openai_chat_text.json")
    model = make_model(kind, r, retries=3)

    @sw.policy
    async def doomed(ctx: sw.Context) -> list[Message]:
        return await ctx.call(model, observations=[Message.user("Paris?")])

    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(llm.InvalidRequest) as caught:
            await runner.run(doomed, run_id="bad")
        (step,) = await runner.steps("bad")
    assert len(r.requests) == 1  # a 400 is never retried
    message = str(caught.value)
    assert "was refused as invalid (HTTP 400)" in message
    assert "Error code: 400" not in message  # the provider's words, not the SDK's dump
    if kind == "chat":
        assert "must be a response to a preceeding message with 'tool_calls'" in message
        assert "param messages.[2].role" in message
    else:
        assert "unexpected `tool_use_id` found in `tool_result` blocks" in message
        assert "request id req_011CTQ8aB3cDe5fG7hJ9kL1m" in message
    # Recorded as the step's error, and rebuilt as the same error on replay (S4).
    assert step.error is not None
    again = error_from_json(step.error)
    assert type(again) is llm.InvalidRequest and str(again) == message


async def test_a_refused_key_names_the_variable(replay: Callable[..., Replay]) -> None:
    refused = {
        "error": {
            "message": "Incorrect API key provided: sk-test. You can find your API key at ...",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    r = replay(Answer("401.json", 401, body=refused))
    with pytest.raises(llm.AuthenticationFailed, match="OPENAI_API_KEY"):
        await ask(make_model("chat", r), [Message.user("Paris?")])


# -- a model's broken tool JSON ---------------------------------------------------------


async def test_broken_tool_json_becomes_an_error_result_the_model_reads(
    replay: Callable[..., Replay],
) -> None:
    r = replay("openai_chat_malformed_arguments.json", "openai_chat_text.json")
    model = make_model("chat", r)
    convo = await ask(model, [Message.user("Weather and time in Paris?")], TOOLS, rounds=2)

    bad_call, _, bad_result, good_result, answer = convo
    assert bad_call.action_call is not None and bad_call.action_call.invalid is not None
    assert bad_result.action_result is not None and good_result.action_result is not None
    assert bad_result.action_result.error_type == "InvalidArguments"
    assert "not valid JSON" in (bad_result.action_result.error_message or "")
    assert good_result.action_result.value == "14:05"
    assert RAN == [("get_time", {"timezone": "Europe/Paris"})]  # the broken call never ran
    assert answer.text.startswith("It is 18 °C")

    tool_messages = [m for m in r.requests[1].json()["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"].startswith(
        "InvalidArguments: arguments for 'get_weather' are not valid JSON: "
        "the arguments are not valid JSON"
    )
    assert '{"city": "Paris", "unit": "celsius"' in tool_messages[0]["content"]
    assert tool_messages[1]["content"] == "14:05"


# -- usage -----------------------------------------------------------------------------


async def test_usage_sums_over_the_runs_recorded_steps(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay("openai_chat_tool_call.json", "openai_chat_text.json")
    model = make_model("chat", r)
    async with sw.Runner(sqlite_url) as runner:
        convo = await ask(model, [Message.user("Paris?")], TOOLS, runner=runner, rounds=2)
        (run,) = await runner.list_runs()
        steps = await runner.steps(run.id)
    expected = llm.Usage(96 + 128, 16 + 15)
    assert llm.run_usage(steps) == expected
    assert llm.run_usage({s.key: s for s in steps}) == expected
    assert llm.usage_of(convo) == expected
    assert llm.usage_of(convo + convo) == expected  # each reply counts once


def test_run_usage_reads_json_without_importing_what_steps_returned() -> None:
    reply = Message.assistant("hi", actor="m")
    reply = Message(
        reply.role,
        reply.actor,
        reply.parts,
        id="r1",
        meta={"usage": {"input_tokens": 7, "output_tokens": 3}},
    )

    class Step:
        def __init__(self, output: str | None) -> None:
            self.output = output

    weird = '{"$t":"model","c":"nowhere:Missing","v":{}}'
    steps = [
        Step(codec.dumps([reply])),
        Step(codec.dumps({"history": [reply]})),  # the same reply again, nested
        Step(weird),
        Step(None),
        Step("not json"),
    ]
    assert llm.run_usage(steps) == llm.Usage(7, 3)


# -- building models ---------------------------------------------------------------------


def test_constructors_and_model_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    chat = llm.model("openai:gpt-4.1-mini")
    assert isinstance(chat, llm.OpenAIChat) and chat.name == "openai:gpt-4.1-mini"
    assert chat.client.api_key == "sk-test"
    assert chat.client.max_retries == 3
    responses = llm.model("openai-responses:gpt-4.1", stream=True)
    assert isinstance(responses, llm.OpenAIResponses) and responses.stream
    claude = llm.model("anthropic:claude-haiku-4-5", max_tokens=100, max_retries=5)
    assert isinstance(claude, llm.AnthropicMessages)
    assert (claude.max_tokens, claude.client.max_retries) == (100, 5)
    assert claude.client.api_key == "sk-ant-test"
    local = llm.model("ollama:llama3.2")
    assert str(local.client.base_url).startswith("http://localhost:11434/v1")
    assert local.client.api_key == "none"  # never the OpenAI key, to a local server
    assert local.name == "ollama:llama3.2"
    routed = llm.model("openrouter:meta-llama/llama-3.1-8b-instruct:free", api_key="or-key")
    assert routed.model == "meta-llama/llama-3.1-8b-instruct:free"
    custom = llm.openai("qwen3", base_url="http://127.0.0.1:9000/v1", name="qwen")
    assert custom.name == "qwen" and custom.client.api_key == "sk-test"
    assert as_policy(chat).name == "openai:gpt-4.1-mini" and as_policy(chat).takes_ctx


def test_missing_keys_and_bad_strings_fail_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(llm.MissingAPIKey, match="set the OPENAI_API_KEY environment variable"):
        llm.openai("gpt-4.1-mini")
    with pytest.raises(llm.MissingAPIKey, match="ANTHROPIC_API_KEY"):
        llm.model("anthropic:claude-haiku-4-5")
    with pytest.raises(llm.MissingAPIKey, match="OPENROUTER_API_KEY"):
        llm.model("openrouter:some/model")
    assert llm.openai("llama3.2", base_url="http://localhost:11434/v1").client.api_key == "none"
    for bad in ("gpt-4.1-mini", "openai:", ":gpt"):
        with pytest.raises(ValueError, match="provider:model"):
            llm.model(bad)
    with pytest.raises(ValueError, match="unknown provider 'mistral'"):
        llm.model("mistral:large")
    with pytest.raises(ValueError, match="api must be"):
        llm.openai("gpt-4.1", api="completions", api_key="k")  # type: ignore[arg-type]
