"""Awaiting a run whose PostgreSQL database is dropped under it.

A real, throwaway database per test (``CREATE DATABASE``), dropped with
``DROP DATABASE ... WITH (FORCE)`` while the run is in the middle of its
work: the caller of ``handle.result()`` gets, after the store's
``retry_for``, an error that names the run, the store (its password hidden)
and the server's last word, instead of waiting for ever. Each wait is
bounded by a timeout far above ``retry_for``, so a hang fails the test.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from tests.conftest import PG_URL, require_postgres

import stalwart as sw

PASSWORD = "hunter2-never-shown"
BOUND = 60.0  # a hang fails the test; the store gives up after retry_for=1

reached: dict[str, asyncio.Event] = {}


def _arrive(where: str) -> None:
    reached.setdefault(where, asyncio.Event()).set()


@sw.policy
async def tick(n: int) -> int:
    return n


@sw.policy
async def naps_between_steps(ctx: sw.Context, seconds: float) -> str:
    await ctx.call(tick, 1)
    _arrive("napping")
    await asyncio.sleep(seconds)
    await ctx.call(tick, 2)
    return "done"


@sw.policy
async def waits_for_approval(ctx: sw.Context) -> str:
    await ctx.call(tick, 1)
    return str(await ctx.wait_for("approval"))


@pytest.fixture
def database() -> Iterator[str]:
    """A store URL (with a password, and retry_for=1) on a new database."""
    require_postgres()
    name = f"gone_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(PG_URL)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{parts.username or 'postgres'}:{PASSWORD}@{host}:{parts.port or 5432}"
    yield urlunsplit(parts._replace(netloc=netloc, path=f"/{name}", query="retry_for=1"))
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def until_reached(where: str) -> None:
    async with asyncio.timeout(BOUND):
        await reached.setdefault(where, asyncio.Event()).wait()


def assert_names_the_store(message: str, url: str, run_id: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    assert f"run {run_id!r}" in message
    assert "postgres:***@" in message and name in message  # the store, by its URL
    assert PASSWORD not in message
    assert f'database "{name}" does not exist' in message  # the server's last word


@pytest.fixture(autouse=True)
def _fresh_events() -> Iterator[None]:
    reached.clear()
    yield
    reached.clear()


@pytest.mark.slow
async def test_a_run_between_steps_when_its_database_is_dropped(database: str) -> None:
    async with sw.Runner(database, policies=[naps_between_steps]) as runner:
        handle = await runner.start(naps_between_steps, 0.5, run_id="napper")
        await until_reached("napping")
        drop(database)
        with pytest.raises(sw.StoreUnavailable) as caught:
            await handle.result(timeout=BOUND)
    assert_names_the_store(str(caught.value), database, "napper")


async def test_a_run_busy_in_its_own_code_when_its_database_is_dropped(database: str) -> None:
    # The run does not touch the store for an hour: the runner's own loop
    # finds the store gone and tells the caller.
    async with sw.Runner(database, policies=[naps_between_steps]) as runner:
        handle = await runner.start(naps_between_steps, 3600.0, run_id="sleeper")
        await until_reached("napping")
        drop(database)
        with pytest.raises(sw.StoreUnavailable) as caught:
            await handle.result(timeout=BOUND)
    assert_names_the_store(str(caught.value), database, "sleeper")


async def test_a_run_waiting_for_a_signal_when_its_database_is_dropped(database: str) -> None:
    async with sw.Runner(database, policies=[waits_for_approval]) as runner:
        handle = await runner.start(waits_for_approval, run_id="waiter")
        async with asyncio.timeout(BOUND):
            while await handle.status() != "suspended":
                await asyncio.sleep(0.02)
        drop(database)
        with pytest.raises(sw.StoreUnavailable) as caught:
            await handle.result(timeout=BOUND)
    assert_names_the_store(str(caught.value), database, "waiter")
