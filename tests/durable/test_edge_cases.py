"""Edge cases a review found: cancels that land early, writes that fail beside
batched records, runs whose inputs this worker cannot read."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from tests.records import step_record

import stalwart as sw
from stalwart.core.ledger import RunRecord


@sw.policy
async def forever(ctx: sw.Context) -> None:
    await asyncio.sleep(3600)


async def test_cancel_right_after_start_in_memory_settles() -> None:
    runner = sw.Runner()
    handle = await runner.start(forever)
    await asyncio.wait_for(handle.cancel(), 5)  # the task may not have begun yet
    with pytest.raises(sw.CancelledRun):
        await handle.result(timeout=5)


async def test_cancel_right_after_recover_settles(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        await client.enqueue(forever, run_id="early")
    async with sw.Runner(store_url, serving=False, policies=[forever]) as runner:
        handles = await runner.recover()
        assert [h.run_id for h in handles] == ["early"]
        await asyncio.wait_for(handles[0].cancel(), 5)  # before its first step ran
        with pytest.raises(sw.CancelledRun):
            await handles[0].result(timeout=5)
        assert (await runner.get_run("early")).status == "cancelled"


async def test_a_refused_write_keeps_the_step_records_batched_beside_it(tmp_path: Path) -> None:
    store = sw.stores.open_store(f"sqlite:///{tmp_path / 'g.db'}?durability=group&group_delay=5")
    assert store is not None
    await store.open()
    try:
        await store.create_run(RunRecord("r", "p", "{}"))
        claimed = await store.claim("r", "me:1:x", 30)
        assert claimed is not None
        step = step_record("1", started_at=0.0)
        await store.record_step("r", claimed.fence, step)  # batched, not yet committed
        with pytest.raises(sw.RunNotFound):
            await store.send_signal("nope", "go", "null")  # fails beside the batch
        assert "1" in await store.load_steps("r")
    finally:
        await store.close()
    reopened = sw.stores.open_store(f"sqlite:///{tmp_path / 'g.db'}")
    assert reopened is not None
    await reopened.open()
    try:
        assert "1" in await reopened.load_steps("r")  # it reached the file
    finally:
        await reopened.close()


async def test_a_run_whose_inputs_cannot_be_read_fails_alone(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        assert client.store is not None
        bad = '{"args":[],"kwargs":{"x":{"$t":"dc","c":"no_such_module_q:Thing","v":{}}}}'
        await client.store.create_run(RunRecord("bad", forever.name, bad))
    async with sw.Runner(store_url, poll_interval=0.05, policies=[forever], serving=True) as worker:
        # The row names a class nobody declared: a clear error, nothing imported.
        with pytest.raises(sw.CorruptedRecord, match=r"inputs of run 'bad'.*no_such_module_q"):
            await sw.RunHandle(worker, "bad").result(timeout=10)
        assert "no_such_module_q" not in sys.modules
        assert worker._bg is not None and not worker._bg.done()  # the worker lives on
        assert (await worker.get_run("bad")).status == "failed"


async def test_a_dead_holders_run_is_found_among_many_live_ones(sqlite_url: str) -> None:
    import os

    from stalwart.stores.base import this_host

    store = sw.stores.open_store(sqlite_url)
    assert store is not None
    await store.open()
    try:
        live_holder = f"{this_host()}:{os.getpid()}:busy"  # this process: alive
        for i in range(300):
            await store.create_run(RunRecord(f"live-{i}", "p", "{}"))
            assert await store.claim(f"live-{i}", live_holder, 300) is not None
        await store.create_run(RunRecord("orphan", "p", "{}"))
        assert await store.claim("orphan", f"{this_host()}:999999999:gone", 300) is not None
        claimed = await store.claim_due(f"{this_host()}:1:me", 30, 1, lambda r: True)
        assert [r.id for r in claimed] == ["orphan"]
    finally:
        await store.close()


async def test_a_handle_of_a_closed_runner_says_so(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        handle = await client.enqueue(forever, run_id="later")
    with pytest.raises(RuntimeError, match="runner of run 'later' is closed"):
        await handle.result(timeout=1)
    async with sw.Runner(store_url, serving=False) as other:
        assert await sw.RunHandle(other, "later").status() == "pending"
