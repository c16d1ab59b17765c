"""Shared fixtures: store URLs for the conformance suite.

Every durable behaviour test takes ``store_url`` and so runs on SQLite (a real
file) and on PostgreSQL (a real server, an isolated schema per test). Without
a reachable PostgreSQL the PostgreSQL half skips, except under CI (``CI`` set),
where it must run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

PG_URL = os.environ.get("STALWART_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def pg_schema_url(schema: str, **options: object) -> str:
    """A store URL on the configured server (``STALWART_TEST_PG``) for
    ``schema``, with store options (``pool_max=4``, ``retry_for=5``) added:
    the one place that knows the server's URL may already have a query."""
    query = urlencode({"schema": schema, **options})
    return f"{PG_URL}{'&' if '?' in PG_URL else '?'}{query}"


def postgres_available() -> str | None:
    """None if PostgreSQL answers, else why not."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'stalwart[postgres]')"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {PG_URL} is unreachable: {exc}"
    try:
        import stalwart.stores.postgres  # noqa: F401
    except ImportError as exc:
        return f"the PostgreSQL store is not available: {exc}"
    return None


def require_postgres() -> None:
    why = postgres_available()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required under CI: {why}")
        pytest.skip(why)


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_schema_url(schema)
    drop_schema(schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of every kind, the memory store included: for
    what the Store interface promises of each."""
    if request.param == "memory":
        yield "memory"
        return
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_schema_url(schema)
    drop_schema(schema)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"
