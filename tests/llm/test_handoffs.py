"""Handoffs: an agent hands the conversation to another, which owns it from then on.

Within one answer the receiving agent answers the question over the history
passed as configured (whole, without tool calls, or summarized by a recorded
model call); across the turns of a Conversation the agent that last received
the conversation answers, derived from the history alone, so a conversation
resumed by replay in a new runner hands the next turn to the same agent
without calling any model again. Each handoff is a recorded step whose name
says who handed to whom. A real process killed with SIGKILL right after that
step is recorded (``handoff_app.py``, on SQLite and PostgreSQL, as a run and
as a conversation's turn) resumes with the receiving agent, the handing
agent's model not asked again.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.crash import executions, kill, spawn, wait_for_line

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.testing import ScriptedLLM, call

QUESTION = "Why was I charged twice?"


def seeing(seen: list[list[Message]], answer: str) -> Callable[[list[Message], Any], str]:
    """A scripted reply that keeps what the model was shown and answers ``answer``."""

    def reply(observations: list[Message], options: Sequence[Any]) -> str:
        seen.append(list(observations))
        return answer

    return reply


def texts(messages: Sequence[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


def triage_and_billing(
    history: llm.HandoffHistory = "whole",
) -> tuple[llm.Agent, ScriptedLLM, list[list[Message]]]:
    seen: list[list[Message]] = []
    billing = llm.Agent(
        ScriptedLLM([seeing(seen, "A duplicate charge: refunded.")], name="billing_llm"),
        instructions="You handle billing.",
        name="billing",
    )
    triage_llm = ScriptedLLM(
        [[Message.assistant("Let me pass you on."), call("transfer_to_billing", _id="t1")]],
        name="triage_llm",
    )
    triage = llm.Agent(
        triage_llm,
        instructions="Route the customer.",
        name="triage",
        handoffs=[llm.Handoff(billing, history=history)],
    )
    return triage, triage_llm, seen


async def test_a_handoff_within_one_answer_lets_the_receiving_agent_answer(
    sqlite_url: str,
) -> None:
    triage, triage_llm, seen = triage_and_billing()
    async with sw.Runner(sqlite_url) as runner:
        answer = await runner.run(triage, question=QUESTION, run_id="r")
        steps = await runner.steps("r")
    assert answer == "A duplicate charge: refunded."
    assert [(s.key, s.name) for s in steps] == [
        ("1", "triage_llm"),
        ("1#1", "transfer_to_billing"),
        ("2", "stalwart.handoff:triage>billing"),
        ("3", "billing_llm"),
    ]
    (shown,) = seen  # the whole history, under billing's own instructions
    assert texts(shown) == [
        ("system", "You handle billing."),
        ("user", QUESTION),
        ("assistant", "Let me pass you on."),
        ("assistant", ""),
        ("tool", "The conversation is handed to billing."),
    ]
    assert triage_llm.calls == 1


def test_the_model_is_offered_one_transfer_tool_per_handoff() -> None:
    triage, _, _ = triage_and_billing()
    (spec,) = llm.tool_specs(triage.options)
    assert spec.name == "transfer_to_billing"
    assert spec.description == "Hand the conversation to billing: You handle billing."
    assert spec.parameters.get("properties", {}) == {}


async def test_a_handoff_without_tools_passes_the_conversation_without_tool_calls() -> None:
    triage, _, seen = triage_and_billing("without_tools")
    assert await triage.run(QUESTION) == "A duplicate charge: refunded."
    assert texts(seen[0]) == [
        ("system", "You handle billing."),
        ("user", QUESTION),
        ("assistant", "Let me pass you on."),
    ]


async def test_a_summarized_handoff_passes_a_recorded_summary_and_the_question(
    sqlite_url: str,
) -> None:
    asked: list[list[Message]] = []
    writer = ScriptedLLM([seeing(asked, "Charged twice in May.")], name="summarizer")
    triage, triage_llm, seen = triage_and_billing(llm.Summary(model=writer))
    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(triage, question=QUESTION, run_id="r") == (
            "A duplicate charge: refunded."
        )
        steps = await runner.steps("r")
    assert [(s.key, s.name) for s in steps] == [
        ("1", "triage_llm"),
        ("1#1", "transfer_to_billing"),
        ("2", "summarizer"),  # the summary is a recorded model call
        ("3", "stalwart.handoff:triage>billing"),
        ("4", "billing_llm"),
    ]
    assert "[triage_llm called transfer_to_billing({})]" in asked[0][1].text
    assert texts(seen[0]) == [
        ("system", "You handle billing."),
        ("user", "Summary of the conversation so far:\nCharged twice in May."),
        ("user", QUESTION),
    ]
    # Run again from its ledger: the summary and the handoff are replayed, nothing is asked.
    async with sw.Runner(sqlite_url) as runner:
        assert await sw.RunHandle(runner, "r").result() == "A duplicate charge: refunded."
    assert (writer.calls, triage_llm.calls) == (1, 1)


async def test_an_agent_hands_the_conversation_back_by_name(sqlite_url: str) -> None:
    billing = llm.Agent(
        ScriptedLLM([call("transfer_to_triage")], name="billing_llm"),
        name="billing",
        handoffs=["triage"],  # declared before triage: handed back by name
    )
    triage = llm.Agent(
        ScriptedLLM([call("transfer_to_billing"), "Back with triage."], name="triage_llm"),
        name="triage",
        handoffs=[billing],
    )
    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(triage, question=QUESTION, run_id="r") == "Back with triage."
        steps = await runner.steps("r")
    names = [s.name for s in steps if s.name.startswith("stalwart.handoff")]
    assert names == ["stalwart.handoff:triage>billing", "stalwart.handoff:billing>triage"]


async def test_a_sub_agent_hands_off_within_its_own_answer() -> None:
    expert = llm.Agent(ScriptedLLM(["42 EUR."], name="expert_llm"), name="expert")
    helper = llm.Agent(
        ScriptedLLM([call("transfer_to_expert")], name="helper_llm"),
        name="helper",
        handoffs=[expert],
    )
    planner_llm = ScriptedLLM(
        [
            call("helper", question="How much?"),
            lambda obs, opts: "Plan: " + obs[-1].text,
        ],
        name="planner_llm",
    )
    planner = llm.Agent(planner_llm, name="planner", tools=[helper])
    assert await planner.run(QUESTION) == "Plan: 42 EUR."


async def test_a_cycle_of_handoffs_ends_at_the_max_rounds_of_the_agent_asked() -> None:
    billing = llm.Agent(
        ScriptedLLM([call("transfer_to_triage")] * 10, name="billing_llm"),
        name="billing",
        handoffs=["triage"],
    )
    triage = llm.Agent(
        ScriptedLLM([call("transfer_to_billing")] * 10, name="triage_llm"),
        name="triage",
        handoffs=[billing],
        max_rounds=5,
    )
    with pytest.raises(llm.MaxRoundsExceeded) as caught:
        await triage.run(QUESTION)
    assert str(caught.value).startswith(
        "agent 'triage' used its 5 rounds (max_rounds) without giving a final answer "
        "(handed to 'billing' on the way)"
    )


def test_bad_handoff_configurations_are_refused_with_the_agent_and_the_name() -> None:
    model = ScriptedLLM(["ok"])
    billing = llm.Agent(model, name="billing")
    other_billing = llm.Agent(model, name="billing")

    @sw.policy
    async def transfer_to_billing() -> str:
        """A tool that clashes with the handoff's."""
        return "no"

    with pytest.raises(ValueError, match="agent 'triage' has several tools named transfer_to_b"):
        llm.Agent(model, name="triage", tools=[transfer_to_billing], handoffs=[billing])
    with pytest.raises(ValueError, match="several handoffs to agents named 'billing'"):
        llm.Agent(model, name="triage", handoffs=[billing, other_billing])
    with pytest.raises(
        ValueError, match=re.escape("agent 'billing': handoffs[0] is an agent of the same name")
    ):
        llm.Agent(model, name="billing", handoffs=[billing])
    refunds = llm.Agent(model, name="refunds", handoffs=[other_billing])
    with pytest.raises(ValueError, match="agent 'refunds' hands off to an agent named 'billing'"):
        llm.Agent(model, name="triage", handoffs=[billing, refunds])
    with pytest.raises(TypeError, match=re.escape("handoffs[0] must be an llm.Agent")):
        llm.Agent(model, name="triage", handoffs=[transfer_to_billing])
    with pytest.raises(
        ValueError, match=re.escape("history must be 'whole', 'without_tools' or llm.Summary")
    ):
        llm.Handoff(billing, history="all")  # type: ignore[arg-type]
    long_name = llm.Agent(model, name="b" * 53)  # transfer_to_ + 53 = 65 characters
    with pytest.raises(ValueError, match="over the 64 models accept"):
        llm.Agent(model, name="triage", handoffs=[long_name])
    llm.Agent(model, name="triage", handoffs=[llm.Agent(model, name="b" * 52)])


async def test_a_handoff_by_a_name_nobody_answers_to_fails_before_any_model_call() -> None:
    model = ScriptedLLM(["ok"])
    lost = llm.Agent(model, name="lost", handoffs=["nobody"])
    with pytest.raises(ValueError) as caught:
        await lost.run(QUESTION)
    assert str(caught.value) == (
        "agent 'lost' hands off to 'nobody' by name, but no agent of that name is "
        "reachable from 'lost' (reachable: lost)"
    )
    assert model.calls == 0


async def test_an_agent_without_handoffs_does_the_work_it_did_before(sqlite_url: str) -> None:
    model = ScriptedLLM([call("transfer_to_billing"), "plain"])
    agent = llm.Agent(model, name="plain")
    assert agent.handoffs is None
    assert agent.options == []
    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(agent, question=QUESTION, run_id="r") == "plain"
        steps = await runner.steps("r")
    # The model's stray transfer call is an unknown tool, as any other would be.
    assert [(s.key, s.name) for s in steps] == [("1", "scripted_llm"), ("2", "scripted_llm")]
    # And a conversation with it writes its replies as it always did.
    chat = sw.Conversation(sw.Runner(), llm.Agent(ScriptedLLM(["hi"]), name="p"), "c")
    assert chat.loop.hands_off is False
    assert await chat.send("hello") == "hi"


# -- across the turns of a conversation --------------------------------------------


def conversation_agents() -> tuple[llm.Agent, ScriptedLLM, ScriptedLLM]:
    """Triage hands to billing on the first turn; billing hands back when asked
    about anything but money, and otherwise answers."""

    def billing_reply(observations: list[Message], options: Sequence[Any]) -> Any:
        question = [m for m in observations if m.role == "user"][-1].text
        if "weather" in question:
            return call("transfer_to_triage")
        return f"billing: {question}"

    billing_llm = ScriptedLLM([billing_reply], name="billing_llm")
    billing = llm.Agent(billing_llm, name="billing", handoffs=["triage"])

    def triage_reply(observations: list[Message], options: Sequence[Any]) -> Any:
        question = [m for m in observations if m.role == "user"][-1].text
        if "charged" in question:
            return call("transfer_to_billing")
        return f"triage: {question}"

    triage_llm = ScriptedLLM([triage_reply, triage_reply], name="triage_llm")
    triage = llm.Agent(triage_llm, name="triage", handoffs=[billing])
    return triage, triage_llm, billing_llm


async def test_the_agent_that_last_received_the_conversation_owns_its_next_turns(
    sqlite_url: str,
) -> None:
    triage, triage_llm, billing_llm = conversation_agents()
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        chat = sw.Conversation(runner, triage, "ada")
        assert await chat.send("I was charged twice", message_id="m1") == (
            "billing: I was charged twice"
        )
        assert await chat.send("And the invoice?", message_id="m2") == ("billing: And the invoice?")
        assert triage_llm.calls == 1  # the second turn went straight to billing
        assert await chat.send("What is the weather?", message_id="m3") == (
            "triage: What is the weather?"
        )
        assert await chat.send("Thanks", message_id="m4") == "triage: Thanks"
    assert (triage_llm.calls, billing_llm.calls) == (3, 3)


async def test_a_resumed_conversation_hands_the_next_turn_to_the_owner_without_asking_again(
    sqlite_url: str,
) -> None:
    triage, triage_llm, billing_llm = conversation_agents()
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        chat = sw.Conversation(runner, triage, "ada")
        await chat.send("I was charged twice", message_id="m1")
    before = (triage_llm.calls, billing_llm.calls)
    assert before == (1, 1)
    # A new runner replays the conversation's run (its first turn whole) and
    # finds billing the owner from the recorded handoff step alone.
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        chat = sw.Conversation(runner, triage, "ada")
        assert await chat.send("And the invoice?", message_id="m2") == ("billing: And the invoice?")
        steps = await runner.steps("ada")
    assert (triage_llm.calls, billing_llm.calls) == (1, 2)
    handoffs = [s.name for s in steps if s.name.startswith("stalwart.handoff")]
    assert handoffs == ["stalwart.handoff:triage>billing"]


async def test_the_owner_survives_a_conversation_continued_as_new() -> None:
    triage, triage_llm, _ = conversation_agents()
    runner = sw.Runner()
    chat = sw.Conversation(runner, triage, "ada", max_turns=1)
    await chat.send("I was charged twice")
    assert await chat.send("And the invoice?") == "billing: And the invoice?"
    assert triage_llm.calls == 1


async def test_a_conversation_asked_in_parallel_runs_keeps_each_owner_apart() -> None:
    triage, _, _ = conversation_agents()
    runner = sw.Runner()
    ada = sw.Conversation(runner, triage, "ada")
    bob = sw.Conversation(runner, triage, "bob")
    await asyncio.gather(ada.send("I was charged twice"), bob.send("Hello"))
    assert await ada.send("More") == "billing: More"
    assert await bob.send("More") == "triage: More"


# -- killed mid-handoff ---------------------------------------------------------------

APP = str(Path(__file__).with_name("handoff_app.py"))


async def _steps(url: str, run_id: str) -> list[tuple[str, str]]:
    async with sw.Runner(url, serving=False) as runner:
        return [(s.key, s.name) for s in await runner.steps(run_id)]


def answers(out: str) -> list[str]:
    return [json.loads(line[7:]) for line in out.splitlines() if line.startswith("answer ")]


def test_a_run_killed_after_the_handoff_step_resumes_with_the_receiving_agent(
    tmp_path: Path, store_url: str
) -> None:
    first = spawn(APP, store_url, tmp_path, "run", "r", "root")
    assert wait_for_line(first, "handoff")[-1] == "handoff 2 stalwart.handoff:triage>billing"
    kill(first)
    assert first.returncode == -signal.SIGKILL
    assert asyncio.run(_steps(store_url, "r")) == [
        ("1", "triage_llm"),
        ("1#1", "transfer_to_billing"),
        ("2", "stalwart.handoff:triage>billing"),
    ]
    assert numbered_models(tmp_path) == [(first.pid, "triage")]

    second = spawn(APP, store_url, tmp_path, "recover", "r", "root")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert "recovered 1" in out
    assert answers(out) == [f"billing answers: {QUESTION}"]
    # The triage model was not asked again; billing answered, in the resumed process.
    assert numbered_models(tmp_path) == [(first.pid, "triage"), (second.pid, "billing")]
    assert asyncio.run(_steps(store_url, "r"))[-1] == ("3", "billing_llm")


def test_a_conversation_killed_mid_handoff_goes_on_with_the_receiving_agent(
    tmp_path: Path, sqlite_url: str
) -> None:
    first = spawn(APP, sqlite_url, tmp_path, "run", "ada", "conversation")
    assert wait_for_line(first, "handoff")[-1].endswith("stalwart.handoff:triage>billing")
    kill(first)
    assert numbered_models(tmp_path) == [(first.pid, "triage")]

    second = spawn(APP, sqlite_url, tmp_path, "recover", "ada", "conversation")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    # The first turn is answered by billing, once; the second goes straight to billing.
    assert answers(out) == [f"billing answers: {QUESTION}", "billing answers: And the invoice?"]
    assert numbered_models(tmp_path) == [
        (first.pid, "triage"),
        (second.pid, "billing"),
        (second.pid, "billing"),
    ]


def numbered_models(workdir: Path) -> list[tuple[int, str]]:
    lines = executions(workdir / "models.txt")
    return [(int(pid), model) for pid, model in zip(lines[::2], lines[1::2], strict=True)]
