"""Tool approval: a model's call of an option made with ``approval=`` waits,
durably, for a person to approve, deny or edit it; the decision is recorded
and a replay applies it without asking anyone again.

Runs on a real SQLite file (the waits are durable waits, S7), the store
interplay on PostgreSQL too, and once in memory. The strict replay executes
a finished run again with a fencing token that can record nothing, so a
model call, a tool call or a wait that would not replay fails.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.crash import executions, kill, spawn, wait_for_line

import stalwart as sw
from stalwart.core import codec
from stalwart.core.approval import wait_key
from stalwart.core.engine.engine import Engine
from stalwart.core.engine.unwind import Halt
from stalwart.core.ledger import asked_key
from stalwart.core.message import Message, result_text
from stalwart.core.policy import as_policy
from stalwart.llm import Agent
from stalwart.stores import open_store
from stalwart.testing import ScriptedLLM, call

RAN: list[tuple[str, dict[str, Any]]] = []


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


def over_limit(ctx: sw.Context, amount: float) -> bool:
    """Refunds over 100 need a person; the context is there for rules that want it."""
    assert ctx.run_id
    return amount > 100


@sw.policy(approval=over_limit)
async def refund(order: str, amount: float) -> str:
    """Refund an order."""
    RAN.append(("refund", {"order": order, "amount": amount}))
    return f"refunded {amount} on {order}"


@sw.policy(approval=True)
async def close_account(customer: str) -> str:
    """Close a customer's account."""
    RAN.append(("close_account", {"customer": customer}))
    return f"closed {customer}"


@sw.policy
async def look_up(order: str) -> str:
    """Look an order up."""
    RAN.append(("look_up", {"order": order}))
    return f"{order}: paid 250"


def results_read(observations: list[Message], options: Sequence[Any]) -> str:
    """The final answer: every tool result the model read, in order."""
    return " | ".join(
        result_text(m.action_result) for m in observations if m.action_result is not None
    )


def agent_for(*first_reply: Message) -> tuple[Agent, ScriptedLLM]:
    model = ScriptedLLM([list(first_reply), results_read], name="support_model")
    tools = [refund, close_account, look_up]
    return Agent(model, instructions="Help.", tools=tools, name="support"), model


async def waiting(runner: sw.Runner, run_id: str) -> tuple[str, dict[str, Any]]:
    """The approval signal the run waits for, and what its wait asks."""
    for _ in range(500):
        run = await runner.get_run(run_id)
        if run.status == "suspended" and run.waiting_for:
            break
        assert run.status not in ("succeeded", "failed"), run.error
        await asyncio.sleep(0.02)
    else:
        raise AssertionError(f"run {run_id} never waited")
    at = wait_key(run.waiting_for)
    assert at is not None, run.waiting_for
    note = await runner.store.load_step(run_id, asked_key(at))
    assert note is not None and note.output is not None
    asked: dict[str, Any] = codec.loads(note.output, "note")
    return run.waiting_for, asked


async def replay_strictly(url: str, run_id: str, target: Any, **kwargs: Any) -> Any:
    """Execute the run again from its records only: any live step is refused."""
    store = open_store(url)
    assert store is not None
    await store.open()
    try:
        x = Engine(run_id, store=store, fence=-1, replay=await store.load_steps(run_id))
        result = await x.run_root(as_policy(target), (), kwargs)
        assert x.live_steps == 0
        return result
    finally:
        await store.close()


async def test_an_approved_call_waits_then_runs_once_and_a_replay_asks_nobody(
    sqlite_url: str,
) -> None:
    agent, model = agent_for(call("refund", _id="c1", order="A-17", amount=250.0))
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Refund A-17", run_id="r1")
        signal, asked = await waiting(runner, "r1")
        assert RAN == []  # nothing ran before the decision
        assert asked["prompt"] == 'Approve refund(order="A-17", amount=250.0)?'
        assert asked["about"] == {
            "calls": [
                {"id": "c1", "tool": "refund", "arguments": {"order": "A-17", "amount": 250.0}}
            ]
        }
        # Where people approve things: the runs waiting for a signal.
        assert [r.id for r in await runner.store.waiting_for_signals()] == ["r1"]
        await runner.signal("r1", signal, {"c1": {"decision": "approve"}})
        assert await handle.result(timeout=10) == "refunded 250.0 on A-17"
        steps = {s.key: s for s in await runner.steps("r1")}
    assert RAN == [("refund", {"order": "A-17", "amount": 250.0})]
    decided = [s for s in steps.values() if s.name == "stalwart.approvals"]
    assert [codec.loads(s.output or "", "") for s in decided] == [{"c1": {"decision": "approve"}}]
    calls = model.calls
    assert await replay_strictly(sqlite_url, "r1", agent, question="Refund A-17") == (
        "refunded 250.0 on A-17"
    )
    assert model.calls == calls and len(RAN) == 1


async def test_a_denied_call_does_not_run_and_the_model_reads_the_reason(
    sqlite_url: str,
) -> None:
    agent, _ = agent_for(call("close_account", _id="c1", customer="ada"))
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Close ada", run_id="r1")
        signal, _ = await waiting(runner, "r1")
        reason = "ada has an open dispute"
        await runner.signal("r1", signal, {"c1": {"decision": "deny", "reason": reason}})
        assert await handle.result(timeout=10) == f"ApprovalDenied: {reason}"
    assert RAN == []
    assert await replay_strictly(sqlite_url, "r1", agent, question="Close ada") == (
        f"ApprovalDenied: {reason}"
    )
    assert RAN == []


async def test_an_edited_call_runs_with_the_edited_arguments_and_the_edit_is_recorded(
    sqlite_url: str,
) -> None:
    agent, _ = agent_for(call("refund", _id="c1", order="A-17", amount=250.0))
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Refund A-17", run_id="r1")
        signal, _ = await waiting(runner, "r1")
        await runner.signal("r1", signal, {"c1": {"decision": "edit", "arguments": {"amount": 80}}})
        assert await handle.result(timeout=10) == "refunded 80.0 on A-17"
        steps = await runner.steps("r1")
    assert RAN == [("refund", {"order": "A-17", "amount": 80.0})]
    decided = next(s for s in steps if s.name == "stalwart.approvals")
    assert codec.loads(decided.output or "", "") == {
        "c1": {"decision": "edit", "arguments": {"amount": 80}}
    }
    ran = next(s for s in steps if s.name == "refund")
    assert codec.loads(ran.args or "", "") == {"order": "A-17", "amount": 80.0}
    assert await replay_strictly(sqlite_url, "r1", agent, question="Refund A-17") == (
        "refunded 80.0 on A-17"
    )
    assert len(RAN) == 1


async def test_a_call_its_rule_lets_through_runs_without_waiting_or_any_record(
    sqlite_url: str,
) -> None:
    agent, _ = agent_for(call("refund", _id="c1", order="A-17", amount=20.0))
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        assert await runner.run(agent, question="Refund A-17", run_id="r1") == (
            "refunded 20.0 on A-17"
        )
        names = [s.name for s in await runner.steps("r1")]
    assert RAN == [("refund", {"order": "A-17", "amount": 20.0})]
    waits = ("stalwart.approvals", "stalwart.ask", "stalwart.signal")
    assert not any(n.startswith(waits) for n in names)


async def test_several_calls_decided_together_by_one_signal(sqlite_url: str) -> None:
    agent, _ = agent_for(
        call("refund", _id="c1", order="A-17", amount=250.0),
        call("look_up", _id="c2", order="A-18"),
        call("close_account", _id="c3", customer="ada"),
        call("refund", _id="c4", order="A-19", amount=500.0),
    )
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Sort these out", run_id="r1")
        signal, asked = await waiting(runner, "r1")
        assert [c["id"] for c in asked["about"]["calls"]] == ["c1", "c3", "c4"]
        assert RAN == []  # the call needing no approval waits with the reply's others
        await runner.signal(
            "r1",
            signal,
            {
                "c1": {"decision": "approve"},
                "c3": {"decision": "deny", "reason": "not today"},
                "c4": {"decision": "edit", "arguments": {"amount": 100}},
            },
        )
        assert await handle.result(timeout=10) == (
            "refunded 250.0 on A-17 | A-18: paid 250 | ApprovalDenied: not today"
            " | refunded 100.0 on A-19"
        )
    assert sorted(name for name, _ in RAN) == ["look_up", "refund", "refund"]


async def test_true_approves_every_call_a_wait_asks_about(sqlite_url: str) -> None:
    agent, _ = agent_for(
        call("refund", _id="c1", order="A-17", amount=250.0),
        call("close_account", _id="c2", customer="ada"),
    )
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Sort these out", run_id="r1")
        signal, _ = await waiting(runner, "r1")
        await runner.signal("r1", signal, True)  # the inspector's Approve button
        assert await handle.result(timeout=10) == "refunded 250.0 on A-17 | closed ada"


async def test_several_calls_decided_one_by_one_each_in_its_own_wait(store_url: str) -> None:
    agent, model = agent_for(
        call("refund", _id="c1", order="A-17", amount=250.0),
        call("close_account", _id="c2", customer="ada"),
    )
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Sort these out", run_id="r1")
        first, asked = await waiting(runner, "r1")
        assert [c["id"] for c in asked["about"]["calls"]] == ["c1", "c2"]
        await runner.signal("r1", first, {"c2": {"decision": "deny", "reason": "no"}})
        second, asked = await waiting(runner, "r1")
        assert second != first  # a new wait, for the call still undecided
        assert [c["id"] for c in asked["about"]["calls"]] == ["c1"]
        assert RAN == []
        await runner.signal("r1", second, {"c1": {"decision": "approve"}})
        assert await handle.result(timeout=10) == "refunded 250.0 on A-17 | ApprovalDenied: no"
        steps = await runner.steps("r1")
    decided = next(s for s in steps if s.name == "stalwart.approvals")
    assert codec.loads(decided.output or "", "") == {
        "c2": {"decision": "deny", "reason": "no"},
        "c1": {"decision": "approve"},
    }
    calls = model.calls
    await replay_strictly(store_url, "r1", agent, question="Sort these out")
    assert model.calls == calls and len(RAN) == 1


@pytest.mark.parametrize(
    ("payload", "field", "says"),
    [
        ("yes", "", "a decision is true"),
        ({}, "", "a decision is true"),
        ({"c9": {"decision": "approve"}}, "['c9']", "no call with this id waits"),
        ({"c1": "approve"}, "['c1']", "a decision is an object"),
        ({"c1": {"decision": "maybe"}}, "['c1']['decision']", "one of approve, deny, edit"),
        ({"c1": {"decision": "deny", "reason": 3}}, "['c1']['reason']", "is a text"),
        ({"c1": {"decision": "edit"}}, "['c1']['arguments']", "the arguments to change"),
        ({"c1": {"decision": "approve", "why": "ok"}}, "['c1']['why']", "is not a field"),
    ],
)
async def test_a_bad_decision_is_refused_naming_the_field_and_the_wait_stays(
    sqlite_url: str, payload: Any, field: str, says: str
) -> None:
    agent, _ = agent_for(call("refund", _id="c1", order="A-17", amount=250.0))
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Refund A-17", run_id="r1")
        signal, _ = await waiting(runner, "r1")
        with pytest.raises(sw.ApprovalError) as caught:
            await runner.signal("r1", signal, payload)
        assert caught.value.field == field
        assert f"tool approval of run 'r1', signal {signal!r}{field}: " in str(caught.value)
        assert says in str(caught.value)
        run = await runner.get_run("r1")
        assert (run.status, run.waiting_for) == ("suspended", signal)
        await runner.signal("r1", signal, True)
        assert await handle.result(timeout=10) == "refunded 250.0 on A-17"


async def test_an_edit_the_tool_refuses_is_not_applied_and_the_run_asks_again(
    sqlite_url: str,
) -> None:
    agent, _ = agent_for(call("refund", _id="c1", order="A-17", amount=250.0))
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Refund A-17", run_id="r1")
        first, _ = await waiting(runner, "r1")
        bad = {"c1": {"decision": "edit", "arguments": {"amount": "lots"}}}
        await runner.signal("r1", first, bad)  # its shape fits: the tool's schema decides
        second, asked = await waiting(runner, "r1")
        assert second != first and RAN == []
        assert "['c1']['arguments']" in asked["about"]["problem"]
        assert "amount" in asked["about"]["problem"]
        assert "The last decision was not applied" in asked["prompt"]
        await runner.signal("r1", second, {"c1": {"decision": "edit", "arguments": {"amount": 90}}})
        assert await handle.result(timeout=10) == "refunded 90.0 on A-17"
    assert RAN == [("refund", {"order": "A-17", "amount": 90.0})]


async def test_a_decision_sent_again_to_a_decided_wait_is_refused(store_url: str) -> None:
    agent, _ = agent_for(call("refund", _id="c1", order="A-17", amount=250.0))
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Refund A-17", run_id="r1")
        signal, _ = await waiting(runner, "r1")
        await runner.signal("r1", signal, True)
        await handle.result(timeout=10)
        with pytest.raises(sw.ApprovalError, match="decided already"):
            await runner.signal("r1", signal, True)
    assert len(RAN) == 1


async def test_a_second_decision_sent_before_the_run_takes_the_first_is_refused(
    store_url: str,
) -> None:
    agent, _ = agent_for(call("refund", _id="c1", order="A-17", amount=250.0))
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        await runner.start(agent, question="Refund A-17", run_id="r1")
        signal, _ = await waiting(runner, "r1")
    # Two people decide at once, through a runner that executes nothing:
    # the run takes neither decision before both are sent.
    async with sw.Runner(store_url) as deciding:
        await deciding.signal("r1", signal, {"c1": {"decision": "deny", "reason": "no"}})
        with pytest.raises(sw.ApprovalError, match="already"):
            await deciding.signal("r1", signal, True)
    assert RAN == []


async def test_in_memory_a_second_decision_for_one_wait_is_refused() -> None:
    agent, _ = agent_for(call("close_account", _id="c1", customer="ada"))
    async with sw.Runner() as runner:
        handle = await runner.start(agent, question="Close ada", run_id="m2")
        async for event in handle.events():
            if isinstance(event, sw.Emitted) and isinstance(event.value, dict):
                signal = event.value["signal"]
                await runner.signal("m2", signal, False)
                with pytest.raises(sw.ApprovalError, match="sent to this wait already"):
                    await runner.signal("m2", signal, True)
                break
        assert await handle.result(timeout=10) == "ApprovalDenied: denied"
    assert RAN == []


hurried_refund = sw.policy(refund, approval_timeout=0.2)
hurried_close = sw.policy(close_account, approval_timeout=0.2)


def asked_calls(steps: Sequence[Any]) -> list[tuple[str, list[str]]]:
    """Each approval wait's signal and the ids of the calls it asked about, in order."""
    notes = [codec.loads(s.output or "", "") for s in steps if s.name == "stalwart.ask"]
    return [(n["signal"], [c["id"] for c in n["about"]["calls"]]) for n in notes]


async def test_a_wait_with_no_decision_within_its_timeout_denies_the_call(
    store_url: str,
) -> None:
    model = ScriptedLLM(
        [call("refund", _id="c1", order="A-17", amount=250.0), results_read], name="m"
    )
    agent = Agent(model, instructions="Help.", tools=[hurried_refund], name="hurried")
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Refund A-17", run_id="t1")
        assert await handle.result(timeout=10) == "ApprovalDenied: no decision within 0.2 s"
        steps = await runner.steps("t1")
        ((signal, ids),) = asked_calls(steps)
        assert ids == ["c1"]
        with pytest.raises(sw.ApprovalError, match="decided already"):
            await runner.signal("t1", signal, True)  # too late: nothing is queued
    assert RAN == []
    decided = next(s for s in steps if s.name == "stalwart.approvals")
    assert codec.loads(decided.output or "", "") == {
        "c1": {"decision": "deny", "reason": "no decision within 0.2 s"}
    }
    calls = model.calls
    replayed = await replay_strictly(store_url, "t1", agent, question="Refund A-17")
    assert replayed == "ApprovalDenied: no decision within 0.2 s"
    assert model.calls == calls and RAN == []


async def test_a_timeout_denies_the_calls_that_have_one_and_the_others_are_asked_again(
    sqlite_url: str,
) -> None:
    reply = [
        call("close_account", _id="c1", customer="ada"),
        call("refund", _id="c2", order="A-17", amount=250.0),
    ]
    model = ScriptedLLM([reply, results_read], name="m")
    agent = Agent(model, instructions="Help.", tools=[hurried_close, refund], name="mixed")
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Close ada, refund A-17", run_id="t2")
        while (now := await waiting(runner, "t2"))[1]["about"]["calls"][0]["id"] != "c2":
            await asyncio.sleep(0.02)  # the first wait, asking about both, times out
        await runner.signal("t2", now[0], True)
        assert await handle.result(timeout=10) == (
            "ApprovalDenied: no decision within 0.2 s | refunded 250.0 on A-17"
        )
        waits = asked_calls(await runner.steps("t2"))
    assert [ids for _, ids in waits] == [["c1", "c2"], ["c2"]]
    assert RAN == [("refund", {"order": "A-17", "amount": 250.0})]


async def test_in_memory_a_wait_with_no_decision_within_its_timeout_denies_the_call() -> None:
    model = ScriptedLLM([call("close_account", _id="c1", customer="ada"), results_read])
    agent = Agent(model, instructions="Help.", tools=[hurried_close], name="hurried")
    async with sw.Runner() as runner:
        assert await runner.run(agent, question="Close ada") == (
            "ApprovalDenied: no decision within 0.2 s"
        )
    assert RAN == []


def test_approval_timeout_is_positive_seconds_for_a_policy_with_approval() -> None:
    assert hurried_refund.approval_timeout == 0.2
    assert hurried_refund.approval is over_limit  # the other settings are kept
    with pytest.raises(ValueError, match="approval_timeout is for a policy made with approval="):
        sw.policy(look_up, approval_timeout=10)
    with pytest.raises(ValueError, match="approval_timeout must be > 0 seconds"):
        sw.policy(close_account, approval_timeout=0)


async def test_a_sub_agent_made_with_approval_waits_for_a_person_before_it_answers(
    store_url: str,
) -> None:
    researcher_model = ScriptedLLM(["Ada's balance is 40."], name="researcher_model")
    researcher = Agent(
        researcher_model,
        instructions="Look things up.",
        name="researcher",
        approval=lambda question: "balance" in question,
        approval_timeout=600,
    )
    model = ScriptedLLM(
        [call("researcher", _id="c1", question="What is Ada's balance?"), results_read],
        name="lead_model",
    )
    lead = Agent(model, instructions="Help.", tools=[researcher], name="lead")
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        handle = await runner.start(lead, question="Ada's balance?", run_id="s1")
        signal, asked = await waiting(runner, "s1")
        assert asked["prompt"] == 'Approve researcher(question="What is Ada\'s balance?")?'
        assert researcher_model.calls == 0  # the sub-agent waits for the decision
        await runner.signal("s1", signal, True)
        assert await handle.result(timeout=10) == "Ada's balance is 40."
    assert researcher_model.calls == 1
    with pytest.raises(ValueError, match="approval_timeout must be > 0"):
        Agent(researcher_model, name="hasty", approval=True, approval_timeout=-1)


RULE_CALLS: list[float] = []


def limit_from_a_table(amount: float) -> bool:
    """A rule with a bug: the table it reads has no limit."""
    RULE_CALLS.append(amount)
    return amount > {}["limit"]  # type: ignore[index]


@sw.policy(approval=limit_from_a_table)
async def transfer(to: str, amount: float) -> str:
    """Transfer money."""
    RAN.append(("transfer", {"to": to, "amount": amount}))
    return f"sent {amount} to {to}"


async def test_a_rule_that_raises_refuses_its_call_naming_run_step_tool_and_rule(
    store_url: str,
) -> None:
    RULE_CALLS.clear()
    reply = [
        call("transfer", _id="c1", to="Bo", amount=5.0),
        call("close_account", _id="c2", customer="ada"),
    ]
    model = ScriptedLLM([reply, results_read], name="support_model")
    agent = Agent(model, instructions="Help.", tools=[transfer, close_account], name="payer")
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Pay Bo, close ada", run_id="r1")
        signal, asked = await waiting(runner, "r1")  # the other call still asks a person
        assert [c["id"] for c in asked["about"]["calls"]] == ["c2"]
        await runner.signal("r1", signal, True)
        result = await handle.result(timeout=10)
        steps = await runner.steps("r1")
    refused = next(s for s in steps if s.name == "stalwart.refused:transfer")
    read = result.split(" | ")
    assert read[0] == (
        f"ApprovalError: run 'r1', step {refused.key}: the approval rule "
        f"{__name__}.limit_from_a_table of 'transfer' raised KeyError: 'limit'; "
        "the call was not run"
    )
    assert read[1] == "closed ada"
    assert RAN == [("close_account", {"customer": "ada"})]  # fails closed: transfer never ran
    assert RULE_CALLS == [5.0]
    assert await replay_strictly(store_url, "r1", agent, question="Pay Bo, close ada") == result
    assert RULE_CALLS == [5.0] and len(RAN) == 1  # the record answers: the rule is not asked


@sw.policy
async def budget_sign_off(ctx: sw.Context) -> Any:
    return await ctx.wait_for("approval:budget")  # a name of the program's own


async def test_a_programs_own_signal_named_approval_is_sent_as_it_is(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        handle = await runner.start(budget_sign_off, run_id="b1")
        for _ in range(500):
            if (await runner.get_run("b1")).status == "suspended":
                break
            await asyncio.sleep(0.02)
        await runner.signal("b1", "approval:budget", {"amount": 100, "by": "ada"})
        assert await handle.result(timeout=10) == {"amount": 100, "by": "ada"}


async def test_in_memory_the_wait_names_its_signal_in_an_event() -> None:
    agent, _ = agent_for(call("close_account", _id="c1", customer="ada"))
    async with sw.Runner() as runner:
        handle = await runner.start(agent, question="Close ada", run_id="m1")
        async for event in handle.events():
            if isinstance(event, sw.Emitted) and isinstance(event.value, dict):
                assert event.value["prompt"] == 'Approve close_account(customer="ada")?'
                await runner.signal("m1", event.value["signal"], {"c1": {"decision": "approve"}})
                break
        assert await handle.result(timeout=10) == "closed ada"
    assert RAN == [("close_account", {"customer": "ada"})]


async def test_approval_is_a_setting_of_the_policy() -> None:
    assert refund.settings()["approval"] is over_limit
    assert look_up.approval is False
    assert sw.policy(look_up, approval=True).approval is True
    with pytest.raises(TypeError, match="approval must be True, False or a function"):
        sw.policy(look_up, approval="always")  # type: ignore[call-overload]


# A process killed while a call waits for approval. The run holds nothing
# while it waits (S7): a new process sends the approval and, as a worker on
# the same SQLite file, resumes the run by replay. The model's first reply is
# replayed, not asked for again; the tool runs once. Counted from files the
# killed and the new process append to.

APP = str(Path(__file__).with_name("approval_app.py"))


def test_a_run_killed_while_waiting_for_approval_finishes_in_a_new_process(
    tmp_path: Path, sqlite_url: str
) -> None:
    first = spawn(APP, sqlite_url, tmp_path, "run", "crash-1")
    line = wait_for_line(first, "waiting ")[-1]
    kill(first)
    assert first.returncode == -signal.SIGKILL
    assert line.startswith("waiting approval:")
    assert executions(tmp_path / "model.txt") == ["model"]
    assert executions(tmp_path / "refund.txt") == []

    second = spawn(APP, sqlite_url, tmp_path, "approve", "crash-1")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    said = [x[len("result ") :] for x in out.splitlines() if x.startswith("result ")]
    assert said, out
    result = json.loads(said[0])
    assert result == "refunded 250.0 on A-17"
    assert executions(tmp_path / "refund.txt") == ["refund"]
    # One model call before the kill, one after: the recorded round was replayed.
    assert executions(tmp_path / "model.txt") == ["model", "model"]


def test_a_run_killed_while_its_approval_wait_runs_out_is_denied_in_a_new_process(
    tmp_path: Path, sqlite_url: str
) -> None:
    first = spawn(APP, sqlite_url, tmp_path, "run-hurried", "crash-3")
    line = wait_for_line(first, "waiting ")[-1]
    kill(first)
    assert first.returncode == -signal.SIGKILL
    assert line.startswith("waiting approval:")

    # Nobody decides: the worker wakes the run at its deadline, recorded
    # before the kill, and the refund is denied.
    second = spawn(APP, sqlite_url, tmp_path, "recover", "crash-3")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    said = [x[len("result ") :] for x in out.splitlines() if x.startswith("result ")]
    assert said, out
    assert json.loads(said[0]) == "ApprovalDenied: no decision within 3 s"
    assert executions(tmp_path / "refund.txt") == []
    assert executions(tmp_path / "model.txt") == ["model", "model"]


def test_a_run_killed_while_its_approved_call_runs_resumes_without_asking_again(
    tmp_path: Path, sqlite_url: str
) -> None:
    first = spawn(APP, sqlite_url, tmp_path, "approve-and-hang", "crash-2")
    wait_for_line(first, "refunding")
    kill(first)
    assert first.returncode == -signal.SIGKILL
    assert executions(tmp_path / "refund.txt") == ["refund"]

    second = spawn(APP, sqlite_url, tmp_path, "recover", "crash-2")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    assert 'result "refunded 250.0 on A-17"' in out.splitlines()
    # The call in flight at the kill ran again (S3); nobody was asked again:
    # one wait, one decision, and the model's recorded round was replayed.
    assert executions(tmp_path / "refund.txt") == ["refund", "refund"]
    assert executions(tmp_path / "model.txt") == ["model", "model"]
    names = asyncio.run(_step_names(sqlite_url, "crash-2"))
    assert names.count("stalwart.ask") == 1
    assert names.count("stalwart.approvals") == 1
    assert names.count("refund") == 1


async def _step_names(url: str, run_id: str) -> list[str]:
    async with sw.Runner(url, serving=False) as runner:
        return [s.name for s in await runner.steps(run_id)]


async def test_a_recorded_decision_that_does_not_fit_fails_the_run_naming_the_step(
    sqlite_url: str,
) -> None:
    agent, _ = agent_for(call("refund", _id="c1", order="A-17", amount=250.0))
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(agent, question="Refund A-17", run_id="r1")
        signal, _ = await waiting(runner, "r1")
        await runner.signal("r1", signal, True)
        await handle.result(timeout=10)
    # A row written behind the engine's back: an edit whose arguments are a text.
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
        changed = db.execute(
            "UPDATE steps SET output = ? WHERE run_id = 'r1' AND name = 'stalwart.approvals'",
            ['{"c1": {"decision": "edit", "arguments": "all of it"}}'],
        ).rowcount
    assert changed == 1
    with pytest.raises(Halt) as caught:  # the run's problem, not a step's (S14)
        await replay_strictly(sqlite_url, "r1", agent, question="Refund A-17")
    assert isinstance(caught.value.cause, sw.CorruptedRecord)
    assert "step 1#0 of run 'r1': the recorded tool approvals['c1']['arguments']" in str(
        caught.value.cause
    )
    assert len(RAN) == 1
