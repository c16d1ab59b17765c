"""Guardrails of the agent: what trips, what it stops, and how a trip replays.

The agent's model is a ``ScriptedLLM``; a guardrail is a plain function that
counts its calls, or an agent on a scripted model. A trip is checked by what
the user relies on: the typed error and its fields, what did not run, and
that a replay from the ledger executes nothing.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.core.policy import as_policy
from stalwart.testing import ScriptedLLM, call

from .test_agent import replay_from_ledger
from .weather import RAN, TOOLS

CHECKED: list[tuple[str, list[str]]] = []  # (guardrail, texts it read), in order


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()
    CHECKED.clear()


def _texts(messages: list[Message]) -> list[str]:
    out = []
    for m in messages:
        if m.action_call is not None:
            out.append(f"call {m.action_call.name} {dict(m.action_call.arguments)}")
        else:
            out.append(m.text)
    return out


@sw.policy
async def no_secrets(messages: list[Message]) -> llm.Verdict:
    """Trips on the word 'password' anywhere in what it reads."""
    CHECKED.append(("no_secrets", _texts(messages)))
    for text in _texts(messages):
        if "password" in text.lower():
            return llm.Verdict.trip("mentions a password")
    return llm.Verdict.ok()


@sw.policy
async def no_lyon(messages: list[Message]) -> llm.Verdict:
    """Trips on a tool call about Lyon."""
    CHECKED.append(("no_lyon", _texts(messages)))
    if any("Lyon" in t for t in _texts(messages)):
        return llm.Verdict.trip("Lyon is out of bounds")
    return llm.Verdict.ok()


@sw.policy
async def always_passes(messages: list[Message]) -> llm.Verdict:
    CHECKED.append(("always_passes", _texts(messages)))
    return llm.Verdict.ok()


# -- trips -----------------------------------------------------------------------------


async def test_an_input_trip_ends_the_answer_before_the_model_is_called() -> None:
    model = ScriptedLLM(["never said"])
    agent = llm.Agent(model, input_guardrails=[no_secrets], name="helper")
    history = [Message.user("hello"), Message.assistant("hi")]
    with pytest.raises(llm.GuardrailTripped) as caught:
        await agent.run("my password is hunter2", history=history)
    assert (caught.value.agent, caught.value.guardrail) == ("helper", "no_secrets")
    assert (caught.value.stage, caught.value.reason) == ("input", "mentions a password")
    assert model.calls == 0
    # It read the history, then the question.
    assert CHECKED == [("no_secrets", ["hello", "hi", "my password is hunter2"])]


async def test_an_output_trip_ends_the_answer_instead_of_returning_it() -> None:
    model = ScriptedLLM(["The admin password is hunter2."])
    agent = llm.Agent(model, output_guardrails=[always_passes, no_secrets])
    with pytest.raises(llm.GuardrailTripped) as caught:
        await agent.run("How do I log in?")
    assert (caught.value.guardrail, caught.value.stage) == ("no_secrets", "output")
    assert model.calls == 1
    # Both read the question, then the answer.
    expected = ["How do I log in?", "The admin password is hunter2."]
    assert sorted(CHECKED) == [("always_passes", expected), ("no_secrets", expected)]


async def test_a_tool_trip_stops_the_call_before_it_runs_and_ends_the_answer() -> None:
    model = ScriptedLLM([call("get_weather", city="Lyon"), "never said"])
    agent = llm.Agent(model, tools=TOOLS, tool_guardrails=[no_lyon])
    with pytest.raises(llm.GuardrailTripped) as caught:
        await agent.run("Weather in Lyon?")
    assert (caught.value.guardrail, caught.value.stage) == ("no_lyon", "tool_call")
    assert caught.value.reason == "Lyon is out of bounds"
    assert RAN == []  # the tool never ran
    assert model.calls == 1  # and the model was not asked again
    assert CHECKED == [("no_lyon", ["call get_weather {'city': 'Lyon', 'unit': 'celsius'}"])]


async def test_of_parallel_tool_calls_the_first_trip_in_call_order_wins() -> None:
    model = ScriptedLLM(
        [[call("get_time", timezone="Europe/Paris"), call("get_weather", city="Lyon")], "no"]
    )
    agent = llm.Agent(model, tools=TOOLS, tool_guardrails=[no_lyon])
    with pytest.raises(llm.GuardrailTripped) as caught:
        await agent.run("Time in Paris and weather in Lyon?")
    assert caught.value.guardrail == "no_lyon"
    # The call whose check passed ran; the tripped one did not.
    assert RAN == [("get_time", {"timezone": "Europe/Paris"})]


# -- passing -----------------------------------------------------------------------------


async def test_guardrails_that_pass_leave_the_answer_and_the_tools_as_they_were(
    sqlite_url: str,
) -> None:
    model = ScriptedLLM([call("get_weather", city="Paris"), "Paris: 18 °C."])
    agent = llm.Agent(
        model,
        tools=TOOLS,
        input_guardrails=[no_secrets],
        output_guardrails=[no_secrets],
        tool_guardrails=[no_lyon],
    )
    async with sw.Runner(sqlite_url) as runner:
        assert await agent.run("Weather in Paris?", runner=runner, run_id="p") == "Paris: 18 °C."
        steps = await runner.steps("p")
    assert RAN == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    # Each verdict is a step of the run, in the order the agent asked.
    assert [(s.key, s.name) for s in steps] == [
        ("1", "no_secrets"),
        ("2", "scripted_llm"),
        ("2#1.1", "no_lyon"),
        ("2#1.2", "get_weather"),
        ("3", "scripted_llm"),
        ("4", "no_secrets"),
    ]
    verdicts = [s.output for s in steps if s.name in ("no_secrets", "no_lyon")]
    assert all('"tripped":false' in (v or "") for v in verdicts)
    assert await replay_from_ledger(sqlite_url, "p", agent, question="Weather in Paris?") == (
        "Paris: 18 °C."
    )


async def test_an_agent_without_guardrails_records_only_its_model_and_tools(
    sqlite_url: str,
) -> None:
    model = ScriptedLLM([call("get_weather", city="Paris"), "Paris: 18 °C."])
    agent = llm.Agent(model, tools=TOOLS)
    assert agent.guardrails is None
    assert agent.options == [as_policy(t) for t in TOOLS]  # the tools themselves, no gate
    async with sw.Runner(sqlite_url) as runner:
        await agent.run("Weather in Paris?", runner=runner, run_id="plain")
        steps = await runner.steps("plain")
    assert [(s.key, s.name) for s in steps] == [
        ("1", "scripted_llm"),
        ("1#1", "get_weather"),
        ("2", "scripted_llm"),
    ]


async def test_each_verdict_is_a_step_in_the_event_stream(sqlite_url: str) -> None:
    model = ScriptedLLM(["Paris: 18 °C."])
    agent = llm.Agent(model, input_guardrails=[always_passes], output_guardrails=[no_secrets])
    async with sw.Runner(sqlite_url) as runner:
        finished = [
            (e.key, e.name, e.result)
            async for e in runner.stream(agent, question="Weather in Paris?")
            if isinstance(e, sw.CallFinished) and e.key  # the steps, not the run's root
        ]
    assert finished == [
        ("1", "always_passes", llm.Verdict.ok()),
        ("2", "scripted_llm", finished[1][2]),
        ("3", "no_secrets", llm.Verdict.ok()),
    ]


async def test_a_sub_agents_trip_is_its_tool_calls_error_and_the_caller_goes_on() -> None:
    sub = llm.Agent(ScriptedLLM(["never said"]), name="vault", input_guardrails=[no_secrets])
    boss = llm.Agent(
        ScriptedLLM([call("vault", question="the password?"), "The vault refused."]),
        tools=[sub],
        name="boss",
    )
    assert await boss.run("Get me the password") == "The vault refused."


# -- a model as a guardrail ----------------------------------------------------------------


async def test_an_agent_on_a_model_can_be_a_guardrail(sqlite_url: str) -> None:
    judge_model = ScriptedLLM(
        ['{"tripped": true, "reason": "asks for medical advice"}'], name="judge_llm"
    )
    judge = llm.Agent(
        judge_model, instructions="Say whether to refuse.", name="judge", output_type=llm.Verdict
    )
    model = ScriptedLLM(["never said"])
    agent = llm.Agent(model, input_guardrails=[judge])
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(llm.GuardrailTripped) as caught:
            await agent.run("Which pills should I take?", runner=runner, run_id="j")
        steps = await runner.steps("j")
    assert (caught.value.guardrail, caught.value.reason) == ("judge", "asks for medical advice")
    assert model.calls == 0
    assert judge_model.calls == 1
    # The judge was asked about the question; its answer is a recorded step.
    by_key = {s.key: s for s in steps}
    assert {k: s.name for k, s in by_key.items()} == {"1": "judge", "1.1": "judge_llm"}
    judged = by_key["1.1"].args or ""
    assert "user: Which pills should I take?" in judged


def test_an_agent_guardrail_must_answer_with_a_verdict() -> None:
    judge = llm.Agent(ScriptedLLM(["yes"]), name="judge")
    with pytest.raises(ValueError, match=r"guardrail 'judge' is an agent whose output_type"):
        llm.Agent(ScriptedLLM([]), output_guardrails=[judge])


async def test_a_guardrail_that_returns_no_verdict_fails_naming_it() -> None:
    @sw.policy
    async def sloppy(messages: list[Message]) -> Any:
        return True

    agent = llm.Agent(ScriptedLLM(["hi"]), name="helper", input_guardrails=[sloppy])
    with pytest.raises(TypeError, match="guardrail 'sloppy' returned bool, not a Verdict"):
        await agent.run("hello")


# -- concurrency with the first model call ------------------------------------------------


async def test_a_concurrent_input_trip_discards_the_first_answer_and_its_tool_calls(
    sqlite_url: str,
) -> None:
    model = ScriptedLLM([call("get_weather", city="Paris"), "never said"])
    agent = llm.Agent(model, tools=TOOLS, input_guardrails=[no_secrets], concurrent_guardrails=True)
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(llm.GuardrailTripped) as caught:
            await agent.run("password reset for Paris?", runner=runner, run_id="c")
        steps = await runner.steps("c")
    assert (caught.value.guardrail, caught.value.stage) == ("no_secrets", "input")
    assert model.calls == 1  # it ran beside the check ...
    assert RAN == []  # ... but the call it made did not run
    # Keyed in call order: the guardrail first, then the model, both recorded.
    assert [(s.key, s.name) for s in steps] == [("1", "no_secrets"), ("2", "scripted_llm")]


async def test_a_concurrent_input_that_passes_keeps_the_first_answer() -> None:
    model = ScriptedLLM([call("get_weather", city="Paris"), "Paris: 18 °C."])
    agent = llm.Agent(model, tools=TOOLS, input_guardrails=[no_secrets], concurrent_guardrails=True)
    assert await agent.run("Weather in Paris?") == "Paris: 18 °C."
    assert model.calls == 2
    assert RAN == [("get_weather", {"city": "Paris", "unit": "celsius"})]


def test_concurrent_guardrails_need_input_guardrails() -> None:
    with pytest.raises(ValueError, match="concurrent_guardrails needs input_guardrails"):
        llm.Agent(ScriptedLLM([]), concurrent_guardrails=True)


# -- replay ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stage", "concurrent"),
    [("input", False), ("input", True), ("output", True), ("tool_call", False)],
)
async def test_a_tripped_run_replays_its_trip_without_executing_anything(
    store_url: str, stage: str, concurrent: bool
) -> None:
    """On SQLite and on PostgreSQL."""
    script: list[Any] = {
        "input": [call("get_weather", city="Paris"), "never said"],
        "output": ["the password is hunter2"],
        "tool_call": [call("get_weather", city="Lyon"), "never said"],
    }[stage]
    question = "my password?" if stage == "input" else "Weather in Lyon?"
    model = ScriptedLLM(script)
    agent = llm.Agent(
        model,
        tools=TOOLS,
        input_guardrails=[no_secrets],
        output_guardrails=[no_secrets],
        tool_guardrails=[no_lyon],
        concurrent_guardrails=concurrent,
    )
    async with sw.Runner(store_url) as runner:
        with pytest.raises(llm.GuardrailTripped) as first:
            await agent.run(question, runner=runner, run_id="t")
    calls, checked = model.calls, list(CHECKED)
    with pytest.raises(llm.GuardrailTripped) as again:
        await replay_from_ledger(store_url, "t", agent, question=question)
    assert (again.value.guardrail, again.value.stage, again.value.reason) == (
        first.value.guardrail,
        first.value.stage,
        first.value.reason,
    )
    assert first.value.stage == stage
    assert (model.calls, CHECKED) == (calls, checked)  # nothing ran again
    assert RAN == []
    # And the run's recorded outcome is the same typed error, from any runner.
    async with sw.Runner(store_url) as runner:
        with pytest.raises(llm.GuardrailTripped) as recorded:
            await sw.RunHandle(runner, "t").result(timeout=5)
    assert (recorded.value.guardrail, recorded.value.reason) == (
        first.value.guardrail,
        first.value.reason,
    )


async def test_a_trip_inside_a_run_is_the_error_of_the_agents_step(sqlite_url: str) -> None:
    model = ScriptedLLM(["never said"])
    agent = llm.Agent(model, name="helper", input_guardrails=[no_secrets])

    @sw.policy
    async def desk(ctx: sw.Context, question: str) -> str:
        try:
            return str(await agent(question=question))
        except llm.GuardrailTripped as trip:
            return f"refused by {trip.guardrail}: {trip.reason}"

    async with sw.Runner(sqlite_url, policies=[desk]) as runner:
        said = await runner.run(desk, question="my password?", run_id="d")
        steps = await runner.steps("d")
    assert said == "refused by no_secrets: mentions a password"
    by_key = {s.key: s for s in steps}
    assert {k: s.name for k, s in by_key.items()} == {"1": "helper", "1.1": "no_secrets"}
    assert "stalwart.errors.GuardrailTripped" in (by_key["1"].error or "")
    assert await replay_from_ledger(sqlite_url, "d", desk, question="my password?") == said


async def test_a_concurrent_first_call_that_fails_raises_its_own_error() -> None:
    def broken(observations: list[Message], options: Any) -> str:
        raise RuntimeError("the model is down")

    agent = llm.Agent(
        ScriptedLLM([broken]), input_guardrails=[always_passes], concurrent_guardrails=True
    )
    with pytest.raises(RuntimeError, match="the model is down"):
        await agent.run("hello")
    assert CHECKED == [("always_passes", ["hello"])]  # the check finished all the same


async def test_a_concurrent_trip_wins_over_a_failed_first_call() -> None:
    def broken(observations: list[Message], options: Any) -> str:
        raise RuntimeError("the model is down")

    agent = llm.Agent(
        ScriptedLLM([broken]), input_guardrails=[no_secrets], concurrent_guardrails=True
    )
    with pytest.raises(llm.GuardrailTripped):
        await agent.run("my password?")


# -- the example -------------------------------------------------------------------------


def test_the_guardrails_example_runs_as_written(sqlite_url: str) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "examples/guardrails.py", "--store", sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "small: Done: refunded 30.00 EUR on A-17.",
        "card: stopped by no_card_numbers (input): the question holds a card number",
        "large: stopped by refund_limit (tool_call): a refund above 100 EUR needs a person",
        "when: stopped by tone_judge (output): the answer promises something",
        "steps of 'large': 1 no_card_numbers, 2 support_llm, 2#1.1 refund_limit",
        "refunds made: [30.0]",
        "read back: refund_limit: a refund above 100 EUR needs a person",
    ]


def test_a_guardrail_that_does_not_take_messages_is_refused_naming_it() -> None:
    @sw.policy
    async def strict(text: str) -> llm.Verdict:
        return llm.Verdict.ok()

    with pytest.raises(ValueError, match=r"the tool call guardrail 'strict' must take `messages`"):
        llm.Agent(ScriptedLLM([]), tool_guardrails=[strict])


def test_two_guardrails_of_one_stage_may_not_share_a_name() -> None:
    with pytest.raises(ValueError, match="several input guardrails named no_secrets"):
        llm.Agent(ScriptedLLM([]), input_guardrails=[no_secrets, no_secrets])


async def test_an_exclusive_tool_stays_exclusive_behind_its_gate() -> None:
    moved: list[tuple[str, float]] = []

    @sw.policy(exclusive=True)
    async def pay(amount: float) -> str:
        """Pay an amount.

        Args:
            amount: How much.
        """
        moved.append(("start", amount))
        await asyncio.sleep(0.01)  # another payment could start meanwhile if not exclusive
        moved.append(("end", amount))
        return "paid"

    model = ScriptedLLM([[call("pay", amount=1), call("pay", amount=2)], "Paid."])
    agent = llm.Agent(model, tools=[pay], tool_guardrails=[always_passes])
    assert agent.options[0].exclusive is True
    assert await agent.run("pay both") == "Paid."
    assert moved == [("start", 1.0), ("end", 1.0), ("start", 2.0), ("end", 2.0)]


@sw.policy(approval=True)
async def wire_money(amount: float) -> str:
    """Wire an amount out of the account.

    Args:
        amount: How much.
    """
    RAN.append(("wire_money", {"amount": amount}))
    return f"wired {amount}"


@pytest.mark.parametrize("guards", ["tool", "concurrent input"])
async def test_a_tool_that_needs_approval_still_waits_for_it_behind_its_gate(
    sqlite_url: str, guards: str
) -> None:
    model = ScriptedLLM([[call("wire_money", _id="c1", amount=900)], "Done."])
    if guards == "tool":
        agent = llm.Agent(model, tools=[wire_money], tool_guardrails=[always_passes])
    else:
        agent = llm.Agent(
            model,
            tools=[wire_money],
            input_guardrails=[always_passes],
            concurrent_guardrails=True,
        )
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="wire 900", run_id="w")
        for _ in range(500):
            run = await runner.get_run("w")
            if run.status != "pending" and run.status != "running":
                break
            await asyncio.sleep(0.02)
        assert run.status == "suspended", run.status
        assert run.waiting_for is not None and run.waiting_for.startswith("approval:")
        assert RAN == []  # nothing was wired before a person decided
        await runner.signal("w", run.waiting_for, False)
        assert await handle.result(timeout=10) == "Done."
    assert RAN == []
