"""B13: a counterfactual fork against a fresh run of the same case.

The case is an agent of ten turns (a tool call each) and an answer, whose
scripted model takes 5 ms a call (a model is the cost a fork saves; the
tools are no-ops). The fresh run asks the new model all eleven times; the
counterfactual forks the recorded run at its last model step onto the new
agent, so the first ten model steps and their tools are replayed from the
ledger and the model is asked once. Measured: seconds per case and the
model calls each made (set-up, recording the original runs, is not timed).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import stalwart as sw
from stalwart import llm
from stalwart.evals import counterfactual
from stalwart.testing import ScriptedLLM, call

from ._util import Result

TURNS = 10


@sw.policy(name="b13_lookup")
async def b13_lookup(page: int) -> str:
    """A page of results.

    Args:
        page: The page number.
    """
    return f"page {page}"


def _model(answer: str) -> ScriptedLLM:
    async def turn(observations: list[sw.Message], options: object) -> sw.Message | str:
        await asyncio.sleep(0.005)
        asked = sum(1 for m in observations if m.role == "assistant")
        return call("b13_lookup", page=asked) if asked < TURNS else answer

    return ScriptedLLM([turn] * (TURNS + 1), name="b13_model")


def _agents() -> tuple[llm.Agent, llm.Agent, ScriptedLLM]:
    new = _model("new answer")
    old_agent = llm.Agent(_model("old answer"), instructions="Read.", tools=[b13_lookup],
                          name="b13_agent")  # fmt: skip
    new_agent = llm.Agent(new, instructions="Read, then sum up.", tools=[b13_lookup],
                          name="b13_agent_v2")  # fmt: skip
    return old_agent, new_agent, new


def _b13(n: int, forked: bool) -> Result:
    old_agent, new_agent, new_model = _agents()

    async def main(url: str) -> float:
        async with sw.Runner(url, policies=[old_agent]) as runner:
            for i in range(n):
                await runner.run(old_agent, f"case {i}", run_id=f"case-{i}")
        async with sw.Runner(url, policies=[new_agent]) as runner:
            start = time.perf_counter()
            if forked:
                report = await counterfactual(
                    runner, [f"case-{i}" for i in range(n)], at="last model step",
                    policy=new_agent, experiment="b13", concurrency=1,
                )  # fmt: skip
                assert report.count("worse") == n, report.table()
            else:
                for i in range(n):
                    assert await runner.run(new_agent, f"case {i}") == "new answer"
            return time.perf_counter() - start

    with tempfile.TemporaryDirectory() as tmp:
        seconds = asyncio.run(main(f"sqlite:///{Path(tmp) / 'b13.db'}"))
    return {
        "seconds": seconds,
        "ms_per_case": 1000 * seconds / n,
        "model_calls_per_case": new_model.calls / n,
    }


def b13_fresh_sqlite(n: int = 50) -> Result:
    return _b13(n, forked=False)


def b13_fork_sqlite(n: int = 50) -> Result:
    return _b13(n, forked=True)
