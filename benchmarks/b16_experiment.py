"""B16: an experiment over a dataset, cases per second, with a no-op model.

The dataset is ``n`` cases drawn from ``n`` recorded runs of a one-turn
agent whose scripted model answers at once (no sleep: the framework is what
is measured). The experiment runs every case as a durable child run of its
own run, 8 at a time, and scores it with ``exact_match``; the floor runs the
same cases as plain runs of the new agent, one after another, unscored.
Recording the history and saving the dataset are not timed.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import stalwart as sw
from stalwart import llm
from stalwart.evals import (
    Dataset,
    DatasetStore,
    Selection,
    cases_from_runs,
    exact_match,
    experiment,
)
from stalwart.testing import ScriptedLLM

from ._util import Result, pg_schema, pg_url_with, require_postgres


def _agents() -> tuple[llm.Agent, llm.Agent]:
    old = llm.Agent(ScriptedLLM(["ok"], name="b16_model"), instructions="Answer.",
                    name="b16_agent")  # fmt: skip
    new = llm.Agent(ScriptedLLM(["ok"], name="b16_model"), instructions="Answer briefly.",
                    name="b16_agent_v2")  # fmt: skip
    return old, new


async def _b16(url: str, n: int, floor: bool) -> Result:
    old, new = _agents()
    async with sw.Runner(url, policies=[old, new]) as runner:
        for i in range(n):
            await runner.run(old, f"case {i}", run_id=f"case-{i}")
        cases = await cases_from_runs(runner, Selection(policy="b16_agent", limit=n))
        dataset = await DatasetStore(runner.store).save(Dataset("b16", cases))
        start = time.perf_counter()
        if floor:
            for c in dataset.cases:
                args, kwargs = c.call()
                assert await runner.run(new, *args, **kwargs) == "ok"
        else:
            report = await experiment(runner, dataset, new, name="b16", scorers=[exact_match],
                                      concurrency=8)  # fmt: skip
            assert report.count("same") == n, report.summary()
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "cases_per_s": n / seconds}


def b16_floor_sqlite(n: int = 200) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_b16(f"sqlite:///{Path(tmp) / 'b16.db'}", n, floor=True))


def b16_stalwart_sqlite(n: int = 200) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_b16(f"sqlite:///{Path(tmp) / 'b16.db'}", n, floor=False))


def b16_stalwart_postgres(n: int = 200) -> Result:
    require_postgres()
    with pg_schema("b16") as schema:
        return asyncio.run(_b16(pg_url_with(schema=schema), n, floor=False))
