"""The PostgreSQL hot paths made leaner (issue 17): a lone step record (one
statement with no RETURNING, on a cursor kept per step connection) and a
signal's wake-up (sent on the sender's own connection once it committed)
still keep every promise of the slower paths.

Real PostgreSQL (``STALWART_TEST_PG``), a schema of this module's own.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable

import pytest
from tests.conftest import PG_URL
from tests.records import step_record

from stalwart.core.errors import StaleLeaseError
from stalwart.core.ledger import RunRecord, StepRecord

psycopg = pytest.importorskip("psycopg") if not os.environ.get("CI") else __import__("psycopg")

from stalwart.stores.postgres import PostgresStore  # noqa: E402


def _step(key: str, output: str = "1") -> StepRecord:
    return step_record(key, output, args="[]", started_at=1.0, finished_at=2.0)


async def _running(store: PostgresStore, owner: str = "host-a:1:x") -> RunRecord:
    rec, _ = await store.create_run(RunRecord(f"r-{uuid.uuid4().hex[:12]}", "p", "{}"))
    claimed = await store.claim(rec.id, owner, 30)
    assert claimed is not None
    return claimed


async def test_a_lone_record_goes_in_and_the_first_result_wins(pg_store: PostgresStore) -> None:
    run = await _running(pg_store)
    first = await pg_store.record_step(run.id, run.fence, _step("1", "first"))
    assert first.output == "first"
    again = await pg_store.record_step(run.id, run.fence, _step("1", "second"))
    assert again.output == "first"  # S3: the record in the store, not ours
    assert [s.output for s in (await pg_store.load_steps(run.id)).values()] == ["first"]


async def test_a_lone_record_of_a_replaced_worker_is_refused(pg_store: PostgresStore) -> None:
    run = await _running(pg_store)
    await pg_store.record_step(run.id, run.fence, _step("1"))
    # Another worker takes the run over (its lease ran out, or it was ours and
    # not live): the old fence must refuse new keys and known keys alike.
    await pg_store.release(run.id, run.fence)
    taken = await pg_store.claim(run.id, "host-b:2:y", 30)
    assert taken is not None and taken.fence > run.fence
    for key in ("2", "1"):
        with pytest.raises(StaleLeaseError, match=r"fencing token .* is stale"):
            await pg_store.record_step(run.id, run.fence, _step(key, "late"))
    steps = await pg_store.load_steps(run.id)
    assert list(steps) == ["1"] and steps["1"].output == "1"


async def test_a_lone_record_after_the_step_connection_died_goes_in(
    pg_store: PostgresStore,
) -> None:
    run = await _running(pg_store)
    await pg_store.record_step(run.id, run.fence, _step("1"))
    conn = await pg_store._step_connection()
    pid = conn.info.backend_pid
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    won = await pg_store.record_step(run.id, run.fence, _step("2", "after"))
    assert won.output == "after"  # retried on a new connection (and a new cursor)
    assert list(await pg_store.load_steps(run.id)) == ["1", "2"]


async def test_a_signal_that_wakes_a_run_wakes_the_listeners(
    pg_store: PostgresStore, pg_schema: str, pg_url: Callable[..., str]
) -> None:
    run = await _running(pg_store)
    assert await pg_store.suspend_run(run.id, run.fence, None, "go")
    other = PostgresStore.from_url(pg_url(pg_schema))
    await other.open()
    heard: list[tuple[str, str | None]] = []
    got = asyncio.Event()

    def wake(kind: str, detail: str | None) -> None:
        heard.append((kind, detail))
        if kind == "ready":
            got.set()

    watching = asyncio.create_task(other.watch(wake))
    try:
        while ("any", None) not in heard:  # it listens
            await asyncio.sleep(0.01)
        woken = await pg_store.send_signal(run.id, "go", "1")
        assert woken.status == "pending"
        async with asyncio.timeout(10):
            await got.wait()
        assert ("ready", "default") in heard  # the run's queue, for the runners
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await other.close()
