"""PostgreSQL fixtures for the store tests that need a server to themselves.

The conformance fixture ``store_url`` (tests/conftest.py) gives each test a
fresh schema; the PostgreSQL-only modules here instead share one schema per
module, so the migrations run once a module rather than once a test. They
also need URLs with store options (``pool_max``, ``retry_for``, ...) and
schemas that do not exist yet, for migration tests.

The fixtures are named ``pg_*`` so that a module's own ``schema`` or
``store`` fixture is never shadowed. Without a reachable PostgreSQL they skip,
except under CI (``CI`` set), where they fail (``require_postgres``).

Nothing PostgreSQL-specific is imported at module level: this conftest loads
for every test in tests/stores, the SQLite ones included, and must not need
psycopg.

For the SQLite failure tests: ``grouped`` (a ``durability=group`` store
whose commit waits long enough to act beside it), ``interrupt`` (a progress
handler that makes SQLite interrupt statements, as a failing disk would) and
``committed_keys`` (what another process reads of a run's steps).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.conftest import PG_URL, drop_schema, opened_store, pg_schema_url, require_postgres

from stalwart.stores.sqlite import SQLiteStore

if TYPE_CHECKING:
    from stalwart.stores.postgres import PostgresStore


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The server's URL, once it has answered: checked once a session, so
    a missing server costs one connect timeout, not one per module."""
    require_postgres()
    return PG_URL


@pytest.fixture
def pg_url() -> Callable[..., str]:
    """``pg_url(schema, **options)``: a store URL for ``schema`` with store
    options (``pool_max=4``, ``retry_for=5``) added to the query string
    (:func:`tests.conftest.pg_schema_url`)."""
    return pg_schema_url


@pytest.fixture(scope="module")
def pg_schema(pg_server: str) -> Iterator[str]:
    """A schema of the module's own, created by the first store that opens
    on it and dropped after the module's last test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(name)


@pytest.fixture
def pg_fresh_schema(pg_server: str) -> Iterator[str]:
    """A schema that does not exist yet (for migration tests), dropped after
    the test."""
    name = f"t_fresh_{uuid.uuid4().hex[:10]}"
    yield name
    drop_schema(name)


async def _opened_pg(schema: str, options: dict[str, object]) -> AsyncIterator[PostgresStore]:
    from stalwart.stores.postgres import PostgresStore

    async for s in opened_store(pg_schema_url(schema, **options)):
        assert isinstance(s, PostgresStore)
        yield s


@pytest.fixture
def pg_store_options() -> dict[str, object]:
    """The options ``pg_store`` opens with; a module overrides this fixture
    to add its own (an ``application_name``, say)."""
    return {"retry_for": 5}


@pytest.fixture
async def pg_store(
    pg_schema: str, pg_store_options: dict[str, object]
) -> AsyncIterator[PostgresStore]:
    """An open store on the module's schema, closed after the test."""
    async for s in _opened_pg(pg_schema, pg_store_options):
        yield s


@pytest.fixture
async def pg_other_store(
    pg_schema: str, pg_store_options: dict[str, object]
) -> AsyncIterator[PostgresStore]:
    """A second worker process's store on the module's schema: its own pool
    and state, opened with ``pg_store``'s options but not its
    ``application_name`` (so cutting ``pg_store``'s connections by that name
    leaves this one alone)."""
    options = {k: v for k, v in pg_store_options.items() if k != "application_name"}
    async for s in _opened_pg(pg_schema, options):
        yield s


# -- SQLite failures -------------------------------------------------------------------
@pytest.fixture
async def grouped(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """A ``durability=group`` store on ``tmp_path / "ledger.db"``: a step is
    acknowledged before its commit, which waits long enough for a test to
    act while acknowledged records are not yet committed. A progress handler
    the test left is cleared before the store closes."""
    store = SQLiteStore(tmp_path / "ledger.db", durability="group", group_delay=0.05)
    await store.open()
    try:
        yield store
    finally:
        store.db.set_progress_handler(None, 1)
        await store.close()


def interrupt(times: int | None) -> Callable[[], int]:
    """A progress handler that makes SQLite interrupt the next ``times``
    statements (every one if None); SQLITE_INTERRUPT rolls an explicit
    transaction back, as a failing disk would."""
    left = [times]

    def handler() -> int:
        if left[0] is None:
            return 1
        if left[0] == 0:
            return 0
        left[0] -= 1
        return 1

    return handler


def committed_keys(path: Path, run_id: str) -> list[str]:
    """The step keys of ``run_id`` another process reads from the SQLite file
    at ``path``: committed ones only."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT key FROM steps WHERE run_id = ? ORDER BY key", (run_id,))
        return [key for (key,) in rows]
    finally:
        db.close()
