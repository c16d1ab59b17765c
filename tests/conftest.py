"""Shared fixtures: store URLs for the conformance suite.

Every durable behaviour test takes ``store_url`` and so runs on SQLite (a real
file) and on PostgreSQL (a real server, an isolated schema per test). Without
a reachable PostgreSQL the PostgreSQL half skips, except under CI (``CI`` set),
where it must run.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from stalwart.stores import open_store
from stalwart.stores.base import Store
from stalwart.stores.sqlite import SQLiteStore

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


def free_port() -> int:
    """A local TCP port nobody listens on (now): for a server a test starts,
    or for a connection that must be refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fresh_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh, empty store of ``kind`` (memory, sqlite, postgres)."""
    if kind == "memory":
        yield "memory"
        return
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_schema_url(schema)
    drop_schema(schema)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of each kind."""
    yield from _fresh_url(request.param, tmp_path)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of every kind, the memory store included: for
    what the Store interface promises of each."""
    yield from _fresh_url(request.param, tmp_path)


async def opened_store(url: str) -> AsyncIterator[Store]:
    """The store at ``url``, opened, and closed after."""
    s = open_store(url)
    assert s is not None
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    """An open store over ``store_url``: SQLite and PostgreSQL. A module that
    needs another set of stores overrides this with one line (``any_store``,
    ``sqlite_store``)."""
    async for s in opened_store(store_url):
        yield s


@pytest.fixture
async def any_store(any_store_url: str) -> AsyncIterator[Store]:
    """An open store over ``any_store_url``: memory, SQLite and PostgreSQL."""
    async for s in opened_store(any_store_url):
        yield s


@pytest.fixture
async def sqlite_store(sqlite_url: str) -> AsyncIterator[SQLiteStore]:
    """An open SQLite store on a real file (the file of ``sqlite_url``)."""
    async for s in opened_store(sqlite_url):
        assert isinstance(s, SQLiteStore)
        yield s


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


# -- the inner loop: which tests are slow ------------------------------------------
#
# ``python -m pytest -m "not slow"`` runs the fast tests (docs/contributing.md);
# ``python -m pytest`` (CI) runs everything. A test is slow when it is in one of
# the modules below (crash trials, browsers, a PostgreSQL server restart,
# Schemathesis, worker fleets), when it takes a fixture that starts a process,
# or when its own code starts one (a subprocess, the crash harness); and a few
# that take seconds of their own are marked ``@pytest.mark.slow`` where they are.

SLOW_MODULES = (
    "tests/chaos/",
    "tests/test_benchmarks_smoke.py",
    "tests/api/test_aisdk_chat_example.py",
    "tests/api/test_chat_example.py",
    "tests/api/test_openapi_contract.py",
    "tests/conversations/test_workers.py",
    "tests/docs/test_readme_setup.py",
    "tests/docs/test_snippets.py",
    "tests/durable/test_crash.py",
    "tests/durable/test_pg_restart.py",
    "tests/durable/test_wakeups.py",
    "tests/durable/test_workers.py",
    "tests/flow/test_crash.py",
    "tests/schedules/test_workers.py",
    "tests/stores/test_postgres_group_crash.py",
    "tests/web/test_browser.py",
    "tests/web/test_browser_values.py",
    "tests/web/test_experiments_browser.py",
    "tests/web/test_live_browser.py",
    "tests/web/test_run_shapes_browser.py",
)
SLOW_FIXTURES = frozenset({"worker", "js"})
SLOW_CODE = (
    "subprocess.",
    "spawn(",
    "_launch(",
    "Popen",
    "sys.executable",
    "StdioServerParameters",
    "served_mcp(",
    "run_cli(",
    "serving_ui(",
    "ui_server(",
    "multiprocessing.",
)
ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _process_starters(path: Path) -> frozenset[str]:
    """The module-level names of ``path`` (helpers, constants) whose code
    starts a process, and those that use them, to a fixed point."""
    source = path.read_text()
    text = {
        name: ast.get_source_segment(source, node) or ""
        for node in ast.parse(source).body
        for name in _defined(node)
    }
    found = {name for name, code in text.items() if any(c in code for c in SLOW_CODE)}
    while True:
        more = {
            name
            for name, code in text.items()
            if name not in found and any(re.search(rf"\b{n}\b", code) for n in found)
        }
        if not more:
            return frozenset(found)
        found |= more


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    return []


def _starts_a_process(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    if function is None:
        return False
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return False
    if any(code in source for code in SLOW_CODE):
        return True
    return any(re.search(rf"\b{n}\b", source) for n in _process_starters(item.path))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else ""
        if (
            where.startswith(SLOW_MODULES)
            or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
            or _starts_a_process(item)
        ):
            item.add_marker(pytest.mark.slow)
