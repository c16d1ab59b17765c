"""Review 5 of the PostgreSQL signal fast notify (stores/postgres/signals.py):
a signal that wakes a run is announced on the ready channel with the run's
queue, now sent on the sender's own connection. Real PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import uuid

import psycopg
import pytest

from stalwart.core.ledger import RunRecord
from stalwart.stores.postgres import PostgresStore

URL = os.environ.get("STALWART_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def test_a_signal_that_wakes_a_run_announces_its_queue() -> None:
    try:
        probe = await psycopg.AsyncConnection.connect(URL, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    schema = f"t_r5_{uuid.uuid4().hex[:8]}"
    store = PostgresStore.from_url(f"{URL}?schema={schema}")
    await store.open()
    try:
        await store.create_run(RunRecord("r5-sig", "p", "{}", queue="r5q"))
        run = await store.claim("r5-sig", "host:1:x", 30)
        assert run is not None
        assert await store.suspend_run("r5-sig", run.fence, None, "go")
        await probe.execute(f'LISTEN "{store._sql.channel["ready"]}"')
        await store.send_signal("r5-sig", "go", '"x"')

        async def first() -> str:
            async for note in probe.notifies():
                return note.payload
            raise AssertionError("no notification")

        assert await asyncio.wait_for(first(), 30) == "r5q"  # bound on a hang only
    finally:
        await store.close()
        await probe.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await probe.close()
