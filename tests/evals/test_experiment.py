"""Experiments: every case of a saved dataset runs as a durable child run of
the experiment's run, at most ``concurrency`` at once; a failing case is
scored, not fatal; the same name resumes and runs no finished case again;
scores are kept per case."""

from __future__ import annotations

import asyncio
import json

import pytest

import stalwart as sw
from stalwart.core.errors import InputMismatchError
from stalwart.core.memory import namespace_text
from stalwart.evals import (
    Dataset,
    DatasetCase,
    DatasetStore,
    exact_match,
    experiment,
    judge,
)
from stalwart.testing import ScriptedLLM

CALLS: list[str] = []
RUNNING = {"now": 0, "most": 0}


@sw.policy
async def shout(text: str) -> str:
    """Upper-case the text; fail on 'boom'."""
    CALLS.append(text)
    RUNNING["now"] += 1
    RUNNING["most"] = max(RUNNING["most"], RUNNING["now"])
    try:
        await asyncio.sleep(0.01)
        if text == "boom":
            raise RuntimeError("the case blew up")
        return text.upper()
    finally:
        RUNNING["now"] -= 1


@sw.policy
async def echo(text: str) -> str:
    return text


def _cases() -> list[DatasetCase]:
    words = ["alpha", "beta", "boom", "delta", "echo", "fox", "golf", "hotel"]
    return [DatasetCase(f"c{i}", [w], expected=w.upper()) for i, w in enumerate(words)]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    RUNNING.update(now=0, most=0)


async def test_every_case_runs_once_as_a_child_and_a_failure_is_scored(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[shout]) as runner:
        ds = await DatasetStore(runner.store).save(Dataset("words", _cases()))
        report = await experiment(runner, ds, shout, name="first", concurrency=3)
        assert [c.case_id for c in report.cases] == [f"c{i}" for i in range(8)]
        assert sorted(CALLS) == sorted(["alpha", "beta", "boom", "delta", "echo", "fox",
                                        "golf", "hotel"])  # fmt: skip
        assert RUNNING["most"] <= 3
        boom = report.cases[2]
        assert (boom.status, boom.verdict, boom.passed) == ("failed", "worse", False)
        assert "now failed" in boom.scores["exact_match"].reason
        assert "the case blew up" in ((await runner.get_run(boom.run_id)).error or "")
        assert report.count("same") == 7 and report.pass_rate == pytest.approx(7 / 8)
        children = {c.run_id for c in report.cases}
        for c in report.cases:
            run = await runner.get_run(c.run_id)
            assert (run.parent_id, run.policy) == ("eval:first", "shout")
        assert len(children) == 8
        parent = await runner.get_run("eval:first")
        assert parent.status == "succeeded"

        # Called again: the same run, read; nothing runs again.
        again = await experiment(runner, ds, shout, name="first", concurrency=3)
        assert len(CALLS) == 8
        assert [c.to_json() for c in again.cases] == [c.to_json() for c in report.cases]
        kept = await runner.store.memory_list(
            namespace_text(("stalwart.evals", "experiment", "first")), 100
        )
        rows = {r.key: json.loads(r.value) for r in kept}
        assert rows["c2"]["verdict"] == "worse" and rows["c0"]["verdict"] == "same"
        assert len(rows) == 8


async def test_another_policy_or_dataset_under_a_name_is_refused(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[shout, echo]) as runner:
        store = DatasetStore(runner.store)
        ds = await store.save(Dataset("words", _cases()[:2]))
        await experiment(runner, ds, shout, name="taken")
        with pytest.raises(InputMismatchError, match="another policy"):
            await experiment(runner, ds, echo, name="taken")
        other = await store.save(Dataset("words", _cases()[:3]))
        with pytest.raises(InputMismatchError, match="other inputs"):
            await experiment(runner, other, shout, name="taken")
        with pytest.raises(ValueError, match="is not saved"):
            await experiment(runner, Dataset("loose", _cases()), shout, name="loose")
        with pytest.raises(ValueError, match="experiment name 'a b'"):
            await experiment(runner, ds, shout, name="a b")


async def test_cases_spread_over_the_workers_of_a_queue(store_url: str) -> None:
    async with (
        sw.Runner(store_url, policies=[shout], queues=["evals"]) as worker,
        sw.Runner(store_url, policies=[shout], queues=["default"]) as runner,
    ):
        serving = asyncio.ensure_future(worker.serve())
        try:
            ds = await DatasetStore(runner.store).save(Dataset("words", _cases()[:4]))
            report = await experiment(runner, ds, shout, name="queued", queue="evals")
        finally:
            serving.cancel()
        assert report.count("same") == 3
        for c in report.cases:
            assert (await runner.get_run(c.run_id)).queue == "evals"


async def test_a_judge_is_asked_once_a_case(store_url: str) -> None:
    grader = ScriptedLLM(["better: louder"] * 2, name="grader")
    judging = judge(grader)
    async with sw.Runner(store_url, policies=[echo]) as runner:
        ds = await DatasetStore(runner.store).save(Dataset("two", _cases()[:2]))
        report = await experiment(runner, ds, echo, name="judged",
                                  scorers=[exact_match, judging])  # fmt: skip
        assert report.cases[0].scores["judge:grader"].verdict == "better"
        assert report.cases[0].verdict == "worse"  # exact_match: ALPHA became alpha
        await experiment(runner, ds, echo, name="judged", scorers=[judging])
        assert grader.calls == 2
