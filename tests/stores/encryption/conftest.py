"""What the encryption tests share: an encrypted runner over each SQL store,
and every byte the database keeps, read around the store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.conftest import PG_URL

from stalwart.runner import Runner
from stalwart.stores import open_store
from stalwart.stores.encryption import EncryptedStore, StaticKeys

from .app import KEY_1, POLICIES


def encrypted(url: str, *keys: tuple[str, bytes]) -> EncryptedStore:
    return EncryptedStore(open_store(url, keys=False), StaticKeys(list(keys) or [KEY_1]))


def database_text(url: str) -> str:
    """Everything the database holds, read without the store: the SQLite
    file and its write-ahead log byte for byte, or every row of every table
    of the PostgreSQL schema as text."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///").split("?")[0])
        return "".join(p.read_bytes().decode("latin-1") for p in path.parent.glob(path.name + "*"))
    import psycopg

    schema = url.split("schema=")[1].split("&")[0]
    out = []
    with psycopg.connect(PG_URL) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            rows = conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t').fetchall()
            out += [r[0] for r in rows]
    return "\n".join(out)


async def suspended(runner: Runner, run_id: str) -> None:
    """Wait until the run is suspended (waiting for its signal)."""
    for _ in range(1000):
        if (await runner.get_run(run_id)).status == "suspended":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id!r} never suspended")


@pytest.fixture
async def runner(store_url: str) -> AsyncIterator[Runner]:
    async with Runner(encrypted(store_url), policies=POLICIES) as r:
        yield r
