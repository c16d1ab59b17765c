"""Counterfactual forks: the prefix is replayed from the ledger (no model
call), each fork is a durable run found again by name, and scorers compare
old against new."""

from __future__ import annotations

import json

import pytest

import stalwart as sw
from stalwart import llm
from stalwart.core.errors import ForkError
from stalwart.evals import (
    Outcome,
    Score,
    Selection,
    as_score,
    called_tool,
    counterfactual,
    exact_match,
    find_step,
    json_match,
    judge,
    tokens_used,
)
from stalwart.testing import ScriptedLLM, call
from stalwart.timetravel import Replace, lineage


@sw.policy
async def lookup(order: str) -> str:
    """An order's status.

    Args:
        order: The order number.
    """
    return f"{order}: shipped"


@sw.policy
async def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order number.
    """
    return f"{order}: refunded"


def _priced(msg: sw.Message, tokens: int) -> sw.Message:
    return sw.Message(
        msg.role, msg.actor, msg.parts, msg.action_call, msg.action_result, msg.id,
        {"usage": {"input_tokens": tokens, "output_tokens": 1}},
    )  # fmt: skip


def agents() -> tuple[ScriptedLLM, llm.Agent, ScriptedLLM, llm.Agent]:
    old = ScriptedLLM(
        [
            lambda o, _: _priced(call("lookup", order="A1"), 100),
            lambda o, _: _priced(call("lookup", order="A1"), 100),
            lambda o, _: _priced(sw.Message.assistant("Shipped."), 100),
        ],
        name="model",
    )
    new = ScriptedLLM(
        [
            lambda o, _: _priced(call("lookup", order="A1"), 100),
            lambda o, _: _priced(call("refund", order="A1"), 10),
            lambda o, _: _priced(sw.Message.assistant("Refunded."), 10),
        ],
        name="model",
    )
    v1 = llm.Agent(old, instructions="Answer.", tools=[lookup, refund], name="support")
    v2 = llm.Agent(new, instructions="Answer; refund late orders.", tools=[lookup, refund],
                   name="support")  # fmt: skip
    return old, v1, new, v2


async def _record(url: str, agent: llm.Agent, n: int) -> None:
    async with sw.Runner(url, policies=[agent]) as runner:
        for i in range(n):
            await runner.run(agent, f"Where is A1? ({i})", run_id=f"t{i}")


async def test_new_code_forks_at_the_second_model_step_without_calling_the_model_for_the_prefix(
    store_url: str,
) -> None:
    old, v1, new, v2 = agents()
    await _record(store_url, v1, 3)
    assert old.calls == 9
    async with sw.Runner(store_url, policies=[v2]) as runner:
        report = await counterfactual(
            runner,
            Selection(policy="support"),
            at="2nd model step",
            policy=v2,
            scorers=[exact_match, called_tool("refund"), tokens_used],
            experiment="refunds",
        )
        assert new.calls == 6  # steps 2 and 3 of each fork; step 1 replayed
        assert old.calls == 9
        assert [c.run_id for c in report.cases] == ["t0", "t1", "t2"]
        case = report.cases[0]
        assert (case.fork_id, case.at, case.status) == ("t0.refunds", "2", "succeeded")
        assert case.scores["called_tool(refund)"].verdict == "better"
        assert case.scores["exact_match"].verdict == "worse"
        assert case.verdict == "worse"
        assert (case.new_tokens, case.old_tokens) == (22, 303)  # 2 new replies, 3 old
        assert await runner.outcome("t0.refunds") == "Refunded."
        steps = {s.key: s for s in await runner.steps("t0.refunds")}
        origin = lineage(list(steps.values()))
        assert origin is not None and (origin.run_id, origin.at) == ("t0", "2")
        recorded = {s.key: s for s in await runner.steps("t0")}
        assert steps["1"].output == recorded["1"].output  # the prefix, as recorded
        assert steps["1"].args_hash != recorded["1"].args_hash  # asked with new instructions
        assert "refund late orders" in (steps["1"].args or "")
        assert report.count("worse") == 3


async def test_a_second_call_reads_finished_forks_and_pays_nothing(sqlite_url: str) -> None:
    _, v1, new, v2 = agents()
    await _record(sqlite_url, v1, 2)
    async with sw.Runner(sqlite_url, policies=[v2]) as runner:
        first = await counterfactual(runner, ["t0", "t1"], at="2", policy=v2, experiment="e")
        calls = new.calls
        again = await counterfactual(runner, ["t0", "t1"], at="2", policy=v2, experiment="e")
    assert calls == 4 and new.calls == 4
    assert again.to_json() == first.to_json()


async def test_a_replaced_tool_result_forks_with_the_recorded_code(sqlite_url: str) -> None:
    old, v1, _, _ = agents()
    await _record(sqlite_url, v1, 1)
    async with sw.Runner(sqlite_url, policies=[v1]) as runner:
        report = await counterfactual(
            runner,
            ["t0"],
            at="first call of tool lookup",
            replace=Replace(result="A1: lost"),
            experiment="lost",
        )
        case = report.cases[0]
        assert case.at == "1#1"
        assert old.calls == 3 + 2  # the fork's model steps 2 and 3, live
        steps = {s.key: s for s in await runner.steps("t0.lost")}
        assert json.loads(steps["1#1"].output or "") == "A1: lost"


async def test_a_judge_is_a_durable_run_asked_once_per_case(sqlite_url: str) -> None:
    _, v1, _, v2 = agents()
    await _record(sqlite_url, v1, 1)
    grader = ScriptedLLM(["better: it refunds"], name="grader")
    scorer = judge(grader)
    async with sw.Runner(sqlite_url, policies=[v2]) as runner:
        for _ in range(2):
            report = await counterfactual(
                runner, ["t0"], at="2", policy=v2, scorers=[scorer], experiment="j"
            )
        score = report.cases[0].scores["judge:grader"]
        assert (score.verdict, score.reason) == ("better", "it refunds")
        assert grader.calls == 1
        assert (await runner.get_run("t0.j.judge:grader")).status == "succeeded"


async def test_step_rules_name_keys_and_refusals_name_the_run(sqlite_url: str) -> None:
    _, v1, _, _ = agents()
    await _record(sqlite_url, v1, 1)
    async with sw.Runner(sqlite_url, policies=[v1]) as runner:
        steps = await runner.steps("t0")
    assert find_step("t0", steps, "2nd model step") == "2"
    assert find_step("t0", steps, "last model step") == "3"
    assert find_step("t0", steps, "first model step") == "1"
    assert find_step("t0", steps, "second call of tool lookup") == "2#1"
    assert find_step("t0", steps, "1#1") == "1#1"
    with pytest.raises(ForkError, match=r"run 't0' has no '4th model step': its model steps"):
        find_step("t0", steps, "4th model step")
    with pytest.raises(ForkError, match=r"calls of tool 'refund' are at none"):
        find_step("t0", steps, "first call of tool refund")
    with pytest.raises(ForkError, match=r"run 't0': --at 'the middle'"):
        find_step("t0", steps, "the middle")


async def test_scorers_compare_json_by_path_and_read_numbers_and_bools() -> None:
    old = Outcome("a", "succeeded", {"items": [{"qty": 1, "id": "x"}]}, None)
    same = Outcome("b", "succeeded", {"items": [{"id": "y", "qty": 1}]}, None)
    other = Outcome("c", "succeeded", {"items": [{"qty": 2, "id": "x"}]}, None)
    assert json_match(ignore=["id"])(old, same) == Score("same", "the same JSON")
    assert json_match()(old, other).reason == "differs at ['items'][0]['qty']"
    assert (await as_score(lambda o, n: 0.5, old, other)).verdict == "better"
    assert (await as_score(lambda o, n: -1, old, other)).verdict == "worse"
    assert (await as_score(lambda o, n: False, old, other)).verdict == "worse"
    assert (await as_score(lambda o, n: True, old, other)).verdict == "same"
    with pytest.raises(TypeError, match="scorer <lambda>: returned str"):
        await as_score(lambda o, n: "good", old, other)


async def test_a_counterfactual_must_change_something(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(ValueError, match="changes something"):
            await counterfactual(runner, ["t0"], at="2")


async def test_a_selected_run_without_the_step_is_skipped_with_the_reason(sqlite_url: str) -> None:
    _, v1, _, v2 = agents()
    await _record(sqlite_url, v1, 1)
    brief = ScriptedLLM(["Shipped."], name="model")
    short = llm.Agent(brief, instructions="Answer.", tools=[lookup], name="support")
    async with sw.Runner(sqlite_url, policies=[short]) as runner:
        await runner.run(short, "Where is A2?", run_id="t-short")
    async with sw.Runner(sqlite_url, policies=[v2]) as runner:
        report = await counterfactual(
            runner, Selection(policy="support"), at="2nd model step", policy=v2, experiment="s"
        )
        again = await counterfactual(
            runner, Selection(policy="support"), at="2nd model step", policy=v2, experiment="s2"
        )
    assert [c.run_id for c in report.cases] == ["t0"]
    assert (
        "run 't-short' has no '2nd model step': its model steps are at 1"
        in (report.skipped["t-short"])
    )
    assert report.summary() == "1 case(s): 0 better, 1 worse, 0 same, 1 skipped"
    assert [c.run_id for c in again.cases] == ["t0"]  # the first experiment's fork is no case
    async with sw.Runner(sqlite_url, policies=[v2]) as runner:
        with pytest.raises(ForkError, match="run 't-short' has no '2nd model step'"):
            await counterfactual(runner, ["t0", "t-short"], at="2nd model step", policy=v2)
        with pytest.raises(sw.RunNotFound, match="no run 'nope'"):
            await counterfactual(runner, ["nope"], at="2", policy=v2)


async def test_a_judge_that_answers_otherwise_scores_worse_saying_what_it_said(
    sqlite_url: str,
) -> None:
    _, v1, _, v2 = agents()
    await _record(sqlite_url, v1, 1)
    scorer = judge(ScriptedLLM(["Both are fine, I think."], name="vague"))
    async with sw.Runner(sqlite_url, policies=[v2]) as runner:
        report = await counterfactual(runner, ["t0"], at="2", policy=v2, scorers=[scorer])
    score = report.cases[0].scores["judge:vague"]
    assert score.verdict == "worse"
    assert score.reason == "the judge answered 'Both are fine, I think.'"


@sw.policy(name="ask")
async def ask(ctx: sw.Context, order: str) -> str:
    return await ctx.call(lookup, order)


@sw.policy(name="ask_then_wait")
async def ask_then_wait(ctx: sw.Context, order: str) -> str:
    found = await ctx.call(lookup, order)
    ok = await ctx.wait_for("approve")
    return f"{found} ({ok})"


async def test_a_fork_that_waits_is_reported_suspended_without_hanging(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[ask, lookup]) as runner:
        await runner.run(ask, "A1", run_id="w")
        report = await counterfactual(
            runner, ["w"], at="1", policy=ask_then_wait, replace=Replace(result="A1: late"),
            experiment="wait",
        )  # fmt: skip
        assert report.cases[0].status == "suspended"
        with pytest.raises(ForkError, match="experiment 'wait' was another change"):
            await counterfactual(runner, ["w"], at="1", policy=ask, experiment="wait")
        await runner.signal("w.wait", "approve", True)
        assert await runner.outcome("w.wait") == "A1: late (True)"
        again = await counterfactual(runner, ["w"], at="1", policy=ask_then_wait, experiment="wait")
        assert again.cases[0].status == "succeeded"
