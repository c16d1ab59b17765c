"""Fallback models through the official SDKs, on recorded payloads, in runs on SQLite.

The first model's provider answers with a recorded failure (a 429, Anthropic's
529, a 500, a timeout, a refused connection, a content filter); what is
checked is what a user relies on: which model answered, that each attempt is
a step of its own in the ledger with its error or reply, that usage is
counted for the model that answered, that a replay and a run resumed after
SIGKILL call no model again, and what stops the chain.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.crash import kill, spawn, wait_for_marks

import stalwart as sw
from stalwart import llm
from stalwart.core.ledger import StepRecord
from stalwart.core.message import Message
from stalwart.core.recorded import error_from_json
from stalwart.llm._fallback import failure_reason
from stalwart.testing import ScriptedLLM, replay_async

from .conftest import Answer, Replay
from .weather import MODELS, RAN, TOOLS, ask, make_model, payload_for

APP = str(Path(__file__).with_name("fallback_agent_app.py"))


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


def other(kind: str) -> str:
    return "anthropic" if kind == "chat" else "chat"


def name_of(kind: str) -> str:
    return ("anthropic:" if kind == "anthropic" else "openai:") + MODELS[kind]


# The first model's provider fails; the reason the chain reads from it.
FAILURES = {
    "rate_limit": ("chat", Answer("openai_error_429.json", 429), "RateLimited"),
    "overloaded": ("anthropic", Answer("anthropic_error_529.json", 529), "ProviderUnavailable"),
    "server_error": ("chat", Answer("openai_error_500.json", 500), "ProviderUnavailable"),
    "timeout": ("chat", Answer("read timeout", raises="ReadTimeout"), "ProviderUnavailable"),
    "connection": ("anthropic", Answer("refused", raises="ConnectError"), "ProviderUnavailable"),
    "content_filter": (
        "chat",
        Answer("openai_error_content_filter.json", 400),
        "InvalidRequest",
    ),
}
# The first model answers, but its provider's content filter stopped the reply.
FILTERED = {"chat": "openai_chat_content_filter.json", "anthropic": "anthropic_refusal.json"}


async def steps_of(runner: sw.Runner) -> dict[str, StepRecord]:
    (run,) = await runner.list_runs()
    return {s.key: s for s in await runner.steps(run.id)}


# -- moving on -----------------------------------------------------------------------


@pytest.mark.parametrize("reason", list(FAILURES))
async def test_the_next_model_answers_when_the_first_fails_for_a_reason_named(
    reason: str, replay: Callable[..., Replay], sqlite_url: str
) -> None:
    kind, failure, error_type = FAILURES[reason]
    r1, r2 = replay(failure), replay(payload_for(other(kind), "text"))
    chain = llm.fallback(make_model(kind, r1), make_model(other(kind), r2))
    async with sw.Runner(sqlite_url) as runner:
        (reply,) = await ask(chain, [Message.user("Weather in Paris?")], TOOLS, runner=runner)
        steps = await steps_of(runner)

    assert reply.text.startswith("It is 18 °C")
    assert reply.actor == name_of(other(kind))  # the model that answered
    assert (len(r1.requests), len(r2.requests)) == (1, 1)
    # Each attempt is a step beneath the chain's, with its model's name.
    assert {k: s.name for k, s in steps.items() if k != ""} == {
        "1": chain.name,
        "1.1": name_of(kind),
        "1.2": name_of(other(kind)),
    }
    assert chain.name == f"{name_of(kind)} or {name_of(other(kind))}"
    # The failed attempt's error is recorded, and reads back as the same reason.
    assert steps["1.1"].error is not None and steps["1.1"].output is None
    recorded = error_from_json(steps["1.1"].error)
    assert type(recorded).__name__ == error_type
    assert failure_reason(recorded) == reason
    # Usage is the answering model's, named by it.
    usage = llm.run_usage_by_model(steps.values())
    assert list(usage) == [name_of(other(kind))]
    assert usage[name_of(other(kind))] == llm.run_usage(steps.values())


@pytest.mark.parametrize("kind", ["chat", "anthropic"])
async def test_a_reply_stopped_by_the_content_filter_moves_on_and_its_tokens_still_count(
    kind: str, replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r1, r2 = replay(FILTERED[kind]), replay(payload_for(other(kind), "text"))
    chain = llm.fallback(make_model(kind, r1), make_model(other(kind), r2))
    async with sw.Runner(sqlite_url) as runner:
        (reply,) = await ask(chain, [Message.user("Weather in Paris?")], runner=runner)
        steps = await steps_of(runner)
    assert reply.actor == name_of(other(kind))
    assert steps["1.1"].output is not None  # the filtered reply is recorded as it came
    # The filtered reply was paid for: it counts, under the model that gave it.
    assert set(llm.run_usage_by_model(steps.values())) == {name_of(kind), name_of(other(kind))}


async def test_tool_calls_of_the_model_that_answered_are_run_beneath_its_step(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r1 = replay(Answer("openai_error_429.json", 429), "openai_chat_text.json")
    r2 = replay("anthropic_tool_use.json")
    chain = llm.fallback(make_model("chat", r1), make_model("anthropic", r2))
    agent = llm.Agent(chain, tools=TOOLS, name="forecaster")
    async with sw.Runner(sqlite_url) as runner:
        answer = await runner.run(agent, question="Weather in Paris?")
        steps = await steps_of(runner)
    assert answer.startswith("It is 18 °C")
    assert RAN == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    # Round 1 fell back to Anthropic, whose call ran as 1.2#1; round 2 is OpenAI's.
    assert sorted(steps) == ["1", "1.1", "1.2", "1.2#1", "2", "2.1"]
    assert steps["1.2#1"].name == "get_weather"
    # The second round's request holds Anthropic's call and its result.
    sent = r1.requests[1].json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    by_model = llm.run_usage_by_model(steps.values())
    assert by_model == {
        "anthropic:claude-haiku-4-5": llm.Usage(612, 71),
        "openai:gpt-4o": llm.Usage(128, 15),
    }


# -- what stops the chain ------------------------------------------------------------


async def test_when_every_model_fails_the_error_names_each_model_and_why(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r1 = replay(Answer("openai_error_429.json", 429, {"x-request-id": "req_1"}))
    r2 = replay(Answer("anthropic_error_529.json", 529))
    chain = llm.fallback(make_model("chat", r1), make_model("anthropic", r2))
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(llm.FallbackExhausted) as caught:
            await ask(chain, [Message.user("Weather in Paris?")], runner=runner)
        (run,) = await runner.list_runs()
    err = caught.value
    assert [(f["model"], f["reason"]) for f in err.failures] == [
        ("openai:gpt-4o", "rate_limit"),
        ("anthropic:claude-haiku-4-5", "overloaded"),
    ]
    text = str(err)
    assert "every model failed" in text
    assert "- openai:gpt-4o (rate_limit): RateLimited: " in text
    assert "Rate limit reached for gpt-4o" in text and "request id req_1" in text
    assert "- anthropic:claude-haiku-4-5 (overloaded): ProviderUnavailable: " in text
    assert (err.status, err.code) == (529, "overloaded_error")
    assert isinstance(err, llm.ProviderError)

    # Any process reads the run's failure back whole, from the ledger.
    async with sw.Runner(sqlite_url, serving=False) as other_runner:
        with pytest.raises(llm.FallbackExhausted) as again:
            await sw.RunHandle(other_runner, run.id).result(timeout=10)
    assert again.value.failures == err.failures
    assert str(again.value) == text


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (Answer("openai_error_400.json", 400), llm.InvalidRequest),
        (Answer("openai_error_401.json", 401), llm.AuthenticationFailed),
    ],
    ids=["bad_request", "refused_key"],
)
async def test_a_bad_request_or_a_refused_key_stops_the_chain_at_once(
    answer: Answer, error: type[Exception], replay: Callable[..., Replay]
) -> None:
    r1, r2 = replay(answer), replay("anthropic_text.json")
    chain = llm.fallback(make_model("chat", r1), make_model("anthropic", r2))
    with pytest.raises(error) as caught:
        await ask(chain, [Message.user("Weather in Paris?")])
    assert r2.requests == []  # the next model would have failed the same way
    assert "fallback" not in str(caught.value)  # the first model's own error, as it is


async def test_a_bad_request_after_a_fallback_names_the_models_tried_before_it(
    replay: Callable[..., Replay],
) -> None:
    r1 = replay(Answer("anthropic_error_529.json", 529))
    r2 = replay(Answer("openai_error_400.json", 400))
    chain = llm.fallback(make_model("anthropic", r1), make_model("chat", r2))
    with pytest.raises(llm.InvalidRequest) as caught:
        await ask(chain, [Message.user("Weather in Paris?")])
    err = caught.value
    assert err.status == 400 and err.provider == "openai"
    assert "must be a response to a preceeding message" in str(err)
    assert f"fallback {chain.name!r} tried before it:" in str(err)
    assert "- anthropic:claude-haiku-4-5 (overloaded): ProviderUnavailable: " in str(err)


async def test_on_names_the_only_failures_the_chain_moves_on_for(
    replay: Callable[..., Replay],
) -> None:
    r1, r2 = replay(Answer("openai_error_429.json", 429)), replay("anthropic_text.json")
    chain = llm.fallback(make_model("chat", r1), make_model("anthropic", r2), on=["overloaded"])
    with pytest.raises(llm.RateLimited):
        await ask(chain, [Message.user("Weather in Paris?")])
    assert r2.requests == []


def test_a_chain_is_checked_when_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"unknown reason\(s\) 'ratelimit'.*rate_limit"):
        llm.fallback(ScriptedLLM([]), on=["ratelimit"])
    with pytest.raises(ValueError, match="on must name"):
        llm.fallback(ScriptedLLM([]), on="rate_limit")
    with pytest.raises(ValueError, match="at least one model"):
        llm.fallback()
    with pytest.raises(TypeError):
        llm.fallback(42)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    chain = llm.fallback("openai:gpt-5-mini", "anthropic:claude-haiku-4-5", name="main")
    assert chain.names == ("openai:gpt-5-mini", "anthropic:claude-haiku-4-5")
    assert isinstance(chain.models[1], llm.AnthropicMessages)
    assert chain.name == "main"


def test_failures_of_function_models_are_classified_too() -> None:
    assert failure_reason(TimeoutError("slow")) == "timeout"
    assert failure_reason(ConnectionRefusedError("down")) == "connection"
    assert failure_reason(ValueError("a bug")) is None
    assert failure_reason(llm.ProviderError("teapot", status=418)) is None


# -- replay and resume ---------------------------------------------------------------


async def test_a_replay_of_a_run_that_fell_back_calls_no_model(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r1 = replay(Answer("openai_error_429.json", 429))
    r2 = replay("anthropic_text.json")
    chain = llm.fallback(make_model("chat", r1), make_model("anthropic", r2))
    agent = llm.Agent(chain, instructions="Be brief.", name="forecaster")
    async with sw.Runner(sqlite_url) as runner:
        answer = await runner.run(agent, question="Weather in Paris?", run_id="paris")
    assert answer.startswith("It is 18 °C")

    # The same agent, its models' transports holding no answer at all.
    idle1, idle2 = replay(), replay()
    again = llm.Agent(
        llm.fallback(make_model("chat", idle1), make_model("anthropic", idle2)),
        instructions="Be brief.",
        name="forecaster",
    )
    report = await replay_async((sqlite_url, "paris"), again)
    assert report.ok, str(report)
    assert idle1.requests == idle2.requests == []


def test_an_agent_killed_after_the_fallback_model_answered_resumes_without_calling_either_again(
    tmp_path: Path, sqlite_url: str
) -> None:
    first = spawn(APP, sqlite_url, tmp_path, "run", "trip")
    marks = wait_for_marks(first, "answered", 1)
    kill(first)
    assert first.returncode == -signal.SIGKILL
    assert marks == ["1.2"]  # Anthropic's reply, beneath the fallback's step 1

    served = (tmp_path / "served.txt").read_text().split("\n")
    before = [line.split()[1:] for line in served if line]
    assert before == [["openai", "1"], ["anthropic", "1"]]
    keys = {s.key for s in asyncio.run(_steps(sqlite_url))}
    assert keys == {"1.1", "1.2"}  # the fallback's own step and the tool had not been recorded

    second = spawn(APP, sqlite_url, tmp_path, "recover", "trip")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    answer = next(json.loads(line[7:]) for line in out.splitlines() if line.startswith("answer "))
    assert answer == "It is 18 °C and partly cloudy in Paris right now."
    assert "answered" not in out  # Anthropic's reply was replayed, not asked for again

    served_after = [line.split() for line in (tmp_path / "served.txt").read_text().splitlines()]
    after = served_after[len(before) :]
    # Neither the failed OpenAI call nor Anthropic's was sent again: only round 2.
    assert [line[1:] for line in after] == [["openai", "2"]]
    assert {int(line[0]) for line in after} == {second.pid}
    assert (tmp_path / "tools.txt").read_text().split() == ["get_weather", "Paris"]

    steps = asyncio.run(_steps(sqlite_url))
    assert sorted(s.key for s in steps) == ["1", "1.1", "1.2", "1.2#1", "2", "2.1"]
    by_key = {s.key: s for s in steps}
    assert by_key["1.1"].error is not None and "RateLimited" in by_key["1.1"].error
    assert llm.run_usage_by_model(steps) == {
        "anthropic:claude-haiku-4-5": llm.Usage(612, 71),
        "openai:gpt-4o": llm.Usage(128, 15),
    }


async def _steps(url: str) -> list[StepRecord]:
    async with sw.Runner(url, serving=False) as runner:
        return await runner.steps("trip")
