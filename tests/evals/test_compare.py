"""Two experiments read back from the store and set side by side, case by
case: a case better, worse or the same by its verdicts, a case only one side
has, the dataset's order; rows that are not what an experiment writes are
counted and left out; the store's experiments listed with what they ran."""

from __future__ import annotations

import time

import stalwart as sw
from stalwart.core.memory import MemoryRecord, namespace_text
from stalwart.evals import (
    Dataset,
    DatasetCase,
    DatasetStore,
    compare_experiments,
    experiment,
    kept_evals,
)


@sw.policy
async def shout(word: str) -> str:
    return word.upper()


@sw.policy
async def whisper(word: str) -> str:
    return word.lower() if word != "ok" else "OK"


def _cases(*words: str) -> list[DatasetCase]:
    return [DatasetCase(w, [w], expected=w.upper()) for w in words]


async def test_cases_compare_by_verdict_in_the_datasets_order(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[shout, whisper]) as runner:
        datasets = DatasetStore(runner.store)
        first = await datasets.save(Dataset("words", _cases("zeta", "ok", "alpha")))
        second = await datasets.save(Dataset("words", _cases("ok", "alpha", "new")))
        await experiment(runner, first, shout, name="loud")
        await experiment(runner, second, whisper, name="quiet")
        c = await compare_experiments(runner.store, "loud", "quiet")
        assert [(r.case_id, r.change) for r in c.rows] == [
            ("zeta", "dropped"),  # A's order first
            ("ok", "same"),
            ("alpha", "worse"),
            ("new", "added"),
        ]
        alpha = c.rows[2]
        assert alpha.a is not None and alpha.b is not None
        assert (alpha.a.verdict, alpha.b.verdict) == ("same", "worse")
        assert alpha.b.run is not None and alpha.b.run.result == '"alpha"'  # its run, read
        assert c.scorers == ["exact_match"]
        assert (c.passed("a"), c.passed("b")) == ((3, 3), (1, 3))
        back = await compare_experiments(runner.store, "quiet", "loud")
        assert [(r.case_id, r.change) for r in back.rows] == [
            ("ok", "same"),
            ("alpha", "better"),
            ("new", "dropped"),
            ("zeta", "added"),
        ]

        listed = {k.name: k for k in await kept_evals(runner.store)}
        assert (listed["quiet"].dataset, listed["quiet"].version) == ("words", "2")
        assert (listed["quiet"].policy, listed["quiet"].worse) == ("whisper", 2)


async def test_a_row_no_experiment_wrote_is_counted_and_left_out(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[shout]) as runner:
        words = await DatasetStore(runner.store).save(Dataset("words", _cases("a", "b")))
        await experiment(runner, words, shout, name="loud")
        now = time.time()
        ns = namespace_text(("stalwart.evals", "experiment", "loud"))
        huge = (
            '{"run_id": "r", "tokens": 1, "verdict": "same", "status": "succeeded",'
            ' "scores": {"s": {"verdict": "same", "value": 1%s}}}' % ("0" * 400)
        )
        rows = (
            ("bad-json", "{"),
            ("bad-verdict", '{"verdict": "<b>"}'),
            ("too-deep", "[" * 100_000 + "]" * 100_000),  # past the JSON parser's depth
            ("huge-score", huge),  # a value no float holds
        )
        for key, value in rows:
            await runner.store.memory_put(MemoryRecord(ns, key, value, "", None, now, now))
        c = await compare_experiments(runner.store, "loud", "loud")
        assert [r.case_id for r in c.rows] == ["a", "b"]
        assert c.unreadable == 8  # four rows, on each side
