"""PostgreSQL signals: one sent while the run is being suspended is never
lost, and one that wakes a run is announced on the ready channel with the
run's queue, sent on the sender's own connection. Real PostgreSQL.

A signal sent while the run is being suspended is never lost.

``suspend_run`` locks the run, finds no unread signal, suspends it and
commits. A ``send_signal`` that began meanwhile waits for that lock; once it
has it, the run it must wake is the suspended one, not the running one its
statement saw when it began. Without that, a run was
left suspended for ever with its signal unread.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import pytest

from stalwart.core.ledger import RunRecord

psycopg = pytest.importorskip("psycopg") if not os.environ.get("CI") else __import__("psycopg")

from tests.conftest import PG_URL, drop_schema, pg_schema_url, require_postgres  # noqa: E402

from stalwart.stores.postgres import PostgresStore  # noqa: E402


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    name = f"t_race_{uuid.uuid4().hex[:10]}"
    yield name
    drop_schema(name)


async def test_a_signal_racing_the_suspend_wakes_the_run(schema: str) -> None:
    store = PostgresStore.from_url(pg_schema_url(schema))
    await store.open()
    try:
        rec, _ = await store.create_run(RunRecord(f"r-{uuid.uuid4().hex[:8]}", "p", "{}"))
        suspender = await psycopg.AsyncConnection.connect(PG_URL)
        try:
            # The suspending transaction: run locked and suspended, not yet committed.
            await suspender.execute(
                f'SELECT 1 FROM "{schema}".runs WHERE id = %s FOR UPDATE', (rec.id,)
            )
            await suspender.execute(
                f"UPDATE \"{schema}\".runs SET status = 'suspended', waiting_for = 'go' "
                "WHERE id = %s",
                (rec.id,),
            )
            send = asyncio.ensure_future(store.send_signal(rec.id, "go", "1"))
            # Let the send begin and block on the run's row lock.
            async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as look:
                for _ in range(500):
                    cur = await look.execute(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE wait_event_type = 'Lock' AND query LIKE %s",
                        (f"%{schema}%",),
                    )
                    row = await cur.fetchone()
                    if row and row[0]:
                        break
                    await asyncio.sleep(0.01)
                else:
                    pytest.fail("the signal never waited for the run's lock")
            await suspender.commit()
            await asyncio.wait_for(send, 10)
        finally:
            await suspender.close()
        after = await store.get_run(rec.id)
        assert after is not None
        assert (after.status, after.waiting_for) == ("pending", None), (
            "the signal is stored but the suspended run was not woken: it would wait for ever"
        )
    finally:
        await store.close()


async def test_a_signal_that_wakes_a_run_announces_its_queue(schema: str) -> None:
    store = PostgresStore.from_url(pg_schema_url(schema))
    await store.open()
    try:
        async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as probe:
            await store.create_run(RunRecord("r5-sig", "p", "{}", queue="r5q"))
            run = await store.claim("r5-sig", "host:1:x", 30)
            assert run is not None
            assert await store.suspend_run("r5-sig", run.fence, None, "go")
            await probe.execute(f'LISTEN "{store._sql.channel["ready"]}"')
            await store.send_signal("r5-sig", "go", '"x"')

            async def first() -> str:
                async for note in probe.notifies():
                    payload: str = note.payload
                    return payload
                raise AssertionError("no notification")

            assert await asyncio.wait_for(first(), 30) == "r5q"  # bound on a hang only
    finally:
        await store.close()
