"""An agent awaited inside a run (``await agent(question=...)``) is a step of that run.

The same as awaiting any policy there: the answer is recorded under the
awaiting step, and a run resumed from its ledger replays it without calling
the model again. (The SIGKILL version of this is in test_durable_agent.py.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import stalwart as sw
from stalwart import llm
from stalwart.testing import ScriptedLLM


def app(model: ScriptedLLM) -> tuple[Any, llm.Agent]:
    """A policy asking the agent, then waiting for a person to confirm."""
    helper = llm.Agent(model, instructions="Answer briefly.", name="helper")

    @sw.policy(name="ask_then_confirm")
    async def ask_then_confirm(ctx: sw.Context, question: str) -> str:
        answer: str = await helper(question=question)
        confirmed = await ctx.wait_for("confirm")
        return f"{answer} confirmed={confirmed}"

    return ask_then_confirm, helper


async def _suspended(handle: sw.RunHandle) -> None:
    async with asyncio.timeout(10):
        while await handle.status() != "suspended":
            await asyncio.sleep(0.02)


async def test_an_awaited_agent_is_a_recorded_step_replayed_on_resume(sqlite_url: str) -> None:
    first_model = ScriptedLLM(["Paris."])
    ask, helper = app(first_model)
    async with sw.Runner(sqlite_url, policies=[ask, helper], poll_interval=0.02) as runner:
        handle = await runner.start(ask, question="Capital of France?", run_id="r")
        await _suspended(handle)
        steps = {s.key: s for s in await runner.steps("r")}
    assert first_model.calls == 1
    assert steps["1"].name == "helper" and steps["1"].output == '"Paris."'
    assert steps["1.1"].name == "scripted_llm"  # the model call, under the agent's step

    # Another runner (a worker) resumes it, with a model that has nothing
    # to say: any call of it would fail the run.
    second_model = ScriptedLLM([])
    ask, helper = app(second_model)
    policies = [ask, helper]
    async with sw.Runner(sqlite_url, policies=policies, poll_interval=0.02, serving=True) as runner:
        await runner.signal("r", "confirm", True)
        result = await sw.RunHandle(runner, "r").result(timeout=10)
    assert result == "Paris. confirmed=True"
    assert second_model.calls == 0


async def test_an_agent_awaited_outside_any_run_answers_alone() -> None:
    model = ScriptedLLM(["Lyon."])
    assert await llm.Agent(model)(question="Second city?") == "Lyon."


async def test_an_agent_given_a_context_says_how_to_call_it() -> None:
    helper = llm.Agent(ScriptedLLM(["-"]), name="helper")

    @sw.policy
    async def old_style(ctx: sw.Context) -> Any:
        return await helper(ctx, "question")  # type: ignore[arg-type]

    with pytest.raises(TypeError, match=r"await agent\(question=\.\.\.\)"):
        await sw.Runner().run(old_style)
