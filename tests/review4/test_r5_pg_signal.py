"""Review 5 of the PostgreSQL signal fast notify (stores/postgres/signals.py):
a signal that wakes a run is announced on the ready channel with the run's
queue, now sent on the sender's own connection. Real PostgreSQL."""

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
    name = f"t_r5_{uuid.uuid4().hex[:8]}"
    yield name
    drop_schema(name)


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
