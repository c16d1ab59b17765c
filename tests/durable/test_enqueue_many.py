"""Batch enqueue (issue 17, part 3), on a real SQLite file and a real PostgreSQL.

What a producer relies on: every call becomes a run on the queue, executed
once by a worker; the handles come back in the order of the calls; an id is
idempotent exactly as with ``enqueue`` (the same call returns the same run,
another call under a taken id is refused); inputs that cannot be recorded
fail the batch before anything is written; the batch is one ``create_runs``
(no per-run transaction); and the worker loop is poked once, so a serving
runner starts on the runs without waiting for its poll.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.ledger import RunRecord
from stalwart.runner import RunCall

SEEN: list[Any] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    SEEN.clear()


@sw.policy
async def square(x: int) -> int:
    SEEN.append(x)
    return x * x


@sw.policy
async def greet(name: str, punct: str = "!") -> str:
    SEEN.append(name)
    return f"hi {name}{punct}"


POLICIES = [square, greet]


async def test_every_call_becomes_a_run_a_worker_executes_once(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        calls = [RunCall(square, i, run_id=f"s{i}") for i in range(30)]
        calls.append(RunCall(greet, name="ann", run_id="g"))
        calls.append(RunCall(square, 99))  # no id: a fresh one
        handles = await client.enqueue_many(calls, queue="math", priority=3)
        assert [h.run_id for h in handles[:31]] == [*(f"s{i}" for i in range(30)), "g"]
        assert len(handles[31].run_id) == 32
        rows = {r.id: r for r in await client.store.get_runs([h.run_id for h in handles])}
        assert len(rows) == 32
        assert {(r.status, r.queue, r.priority) for r in rows.values()} == {("pending", "math", 3)}
        assert rows["g"].policy == greet.name
        await asyncio.sleep(0.1)
        assert SEEN == []  # the client does not serve: nothing executed yet
    async with sw.Runner(
        store_url, serving=True, queues=["math"], poll_interval=0.05, policies=POLICIES
    ) as worker:
        results = [await sw.RunHandle(worker, h.run_id).result(timeout=20) for h in handles]
    assert results == [*(i * i for i in range(30)), "hi ann!", 99 * 99]
    assert sorted(map(str, SEEN)) == sorted(map(str, [*range(30), "ann", 99]))  # once each


async def test_the_same_batch_again_returns_the_same_runs(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        first = await client.enqueue_many([RunCall(square, i, run_id=f"i{i}") for i in range(5)])
        # The same ids with the same calls (one spelled by keyword), plus new ones.
        again = await client.enqueue_many(
            [RunCall(square, x=i, run_id=f"i{i}") for i in range(5)]
            + [RunCall(square, 7, run_id="i7")],
        )
        assert [h.run_id for h in again] == [h.run_id for h in first] + ["i7"]
        # ...and the same as enqueue() would say about those ids.
        one = await client.enqueue(square, 3, run_id="i3")
        assert one.run_id == "i3"
        assert len(await client.list_runs(limit=50)) == 6
    async with sw.Runner(store_url, serving=True, poll_interval=0.05, policies=POLICIES) as w:
        assert await sw.RunHandle(w, "i7").result(timeout=20) == 49
        for i in range(5):
            assert await sw.RunHandle(w, f"i{i}").result(timeout=20) == i * i
    assert sorted(SEEN) == [0, 1, 2, 3, 4, 7]  # each run executed once


async def test_a_taken_id_with_another_call_is_refused(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        await client.enqueue(square, 1, run_id="taken")
        with pytest.raises(sw.InputMismatchError, match="'taken' exists with other inputs"):
            await client.enqueue_many(
                [RunCall(square, 5, run_id="fresh"), RunCall(square, 2, run_id="taken")]
            )
        with pytest.raises(sw.InputMismatchError, match="another policy"):
            await client.enqueue_many([RunCall(greet, "x", run_id="taken")])
        kept = await client.get_run("taken")
        assert json.loads(kept.inputs) == {"args": [1], "kwargs": {}}  # left as it was
        # The new run beside the refused one was enqueued (documented), and
        # the corrected batch returns it rather than a second one.
        assert (await client.get_run("fresh")).status == "pending"
        handles = await client.enqueue_many(
            [RunCall(square, 5, run_id="fresh"), RunCall(square, 1, run_id="taken")]
        )
        assert [h.run_id for h in handles] == ["fresh", "taken"]
        assert len(await client.list_runs(limit=10)) == 2


async def test_an_id_twice_in_one_batch(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        handles = await client.enqueue_many(
            [RunCall(square, 4, run_id="d"), RunCall(square, x=4, run_id="d")]
        )
        assert [h.run_id for h in handles] == ["d", "d"]
        assert len(await client.list_runs(limit=10)) == 1
        with pytest.raises(sw.InputMismatchError, match="'e' exists with other inputs"):
            await client.enqueue_many(
                [
                    RunCall(square, 8, run_id="new"),
                    RunCall(square, 1, run_id="e"),
                    RunCall(square, 2, run_id="e"),
                ],
            )
        # Refused before the write: no run of that batch exists.
        assert [r.id for r in await client.list_runs(limit=10)] == ["d"]


async def test_inputs_that_cannot_be_recorded_fail_the_batch_before_any_write(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        with pytest.raises(sw.SerializationError, match="inputs of run 'bad'"):
            await client.enqueue_many(
                [RunCall(square, 1, run_id="ok"), RunCall(square, object(), run_id="bad")]
            )
        with pytest.raises(ValueError):
            await client.enqueue_many([RunCall(square, 1, run_id="")])  # an id checked
        assert await client.list_runs() == []


async def test_the_batch_is_one_store_write_and_one_poke(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        writes: list[int] = []
        original = client.store.create_runs

        async def counted(runs: list[RunRecord]) -> list[RunRecord]:
            writes.append(len(runs))
            return await original(runs)

        async def refuse(run: RunRecord) -> Any:
            raise AssertionError("create_run called: a transaction per run")

        monkeypatch.setattr(client.store, "create_runs", counted)
        monkeypatch.setattr(client.store, "create_run", refuse)
        pokes: list[float] = []
        monkeypatch.setattr(client._table, "wake_worker", lambda: pokes.append(time.monotonic()))
        await client.enqueue_many([RunCall(square, i) for i in range(300)])
        assert writes == [300] and len(pokes) == 1


async def test_the_poke_wakes_a_serving_runner_before_its_poll(store_url: str) -> None:
    async with sw.Runner(store_url, serving=True, poll_interval=5.0, policies=POLICIES) as runner:
        await asyncio.sleep(0.3)  # the loop has polled once and sleeps 5 s now
        start = time.monotonic()
        handles = await runner.enqueue_many([RunCall(square, i) for i in range(10)])
        assert [await h.result(timeout=10) for h in handles] == [i * i for i in range(10)]
        assert time.monotonic() - start < 2.5


async def test_delay_holds_the_batch_back(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        await client.enqueue_many([RunCall(square, 2, run_id="late")], delay=0.6)
    start = time.monotonic()
    async with sw.Runner(store_url, serving=True, poll_interval=0.05, policies=POLICIES) as w:
        assert await sw.RunHandle(w, "late").result(timeout=10) == 4
    assert time.monotonic() - start >= 0.5


async def test_memory_has_no_queue() -> None:
    runner = sw.Runner()
    with pytest.raises(sw.StoreError, match="durable store"):
        await runner.enqueue_many([RunCall(square, 1)])


async def test_only_run_calls_are_taken(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        with pytest.raises(TypeError, match="RunCall"):
            await client.enqueue_many([(square, 1)])  # type: ignore[list-item]
        assert await client.list_runs() == []
