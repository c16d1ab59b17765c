"""Stores whose tables the operator creates (``migrate=false``) and the SQL
they apply (``Store.ddl``), on a real SQLite file and a real PostgreSQL schema.

The SQL is applied as an operator would, by a plain client (the sqlite3
module, psycopg), never through the store; old stores are built from the
code's own migrations.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PG_URL
from tests.crash import kill, spawn, wait_for_line
from tests.records import claimed_run, step_record

from stalwart.core.errors import StoreError
from stalwart.core.ledger import StoredStep
from stalwart.stores import open_store
from stalwart.stores.sqlite import SQLiteStore

OLD = 2  # a schema version both stores have migrated from


def _no_migrate(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}migrate=false"


def _schema(url: str) -> str:
    store = open_store(url)
    return str(getattr(store, "schema", ""))


def _apply(url: str, sql: str) -> None:
    """Run ``sql`` with the database's own client, as an operator would."""
    if url.startswith("sqlite://"):
        db = sqlite3.connect(SQLiteStore.from_url(url).path, isolation_level=None)
        try:
            db.executescript(sql)
        finally:
            db.close()
        return
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.encode())


def _build_old(url: str, version: int) -> None:
    """The store at schema ``version``, made by the code's own migrations,
    holding one pending run."""
    if url.startswith("sqlite://"):
        from stalwart.stores.sqlite.schema import MIGRATIONS as LITE

        db = sqlite3.connect(SQLiteStore.from_url(url).path, isolation_level=None)
        db.execute("CREATE TABLE stalwart_schema (version INTEGER NOT NULL)")
        for v in range(1, version + 1):
            db.executescript(LITE[v])
            db.execute("INSERT INTO stalwart_schema VALUES (?)", (v,))
        db.execute(
            "INSERT INTO runs (id, policy, inputs, status, created_at, updated_at) "
            "VALUES ('old', 'p', '{}', 'pending', 1, 1)"
        )
        db.close()
        return
    import psycopg

    from stalwart.stores.postgres.schema import MIGRATIONS as PG

    s = f'"{_schema(url)}"'
    with psycopg.connect(PG_URL, autocommit=True) as conn, conn.transaction():
        conn.execute(f"CREATE SCHEMA {s}".encode())
        conn.execute(
            f"CREATE TABLE {s}.stalwart_schema (version INTEGER PRIMARY KEY, "
            "applied_at DOUBLE PRECISION NOT NULL)".encode()
        )
        for v in range(1, version + 1):
            for statement in PG[v]:
                conn.execute(statement.format(s=s).encode())
            conn.execute(f"INSERT INTO {s}.stalwart_schema VALUES ({v}, 0)".encode())
        conn.execute(
            f"INSERT INTO {s}.runs (id, policy, inputs, status, created_at, updated_at) "
            "VALUES ('old', 'p', '{}', 'pending', 1, 1)".encode()
        )


def _footprint(url: str) -> Any:
    """What a refused open must leave as it was: the SQLite file's bytes
    (None if there is none), the PostgreSQL schema's tables and versions."""
    if url.startswith("sqlite://"):
        path = Path(SQLiteStore.from_url(url).path)
        if not path.exists():
            return None
        return hashlib.sha256(path.read_bytes()).hexdigest()
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            (_schema(url),),
        ).fetchall()
        versions = (
            conn.execute(f'SELECT version FROM "{_schema(url)}".stalwart_schema').fetchall()
            if tables
            else []
        )
        exists = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (_schema(url),)
        ).fetchone()
    return tables, sorted(versions), exists


async def _ddl(url: str) -> str:
    return await open_store(url).ddl()


async def _works(url: str) -> None:
    """The store opens with migrate=false and takes a run and a step."""
    store = open_store(_no_migrate(url))
    await store.open()
    try:
        fence = await claimed_run(store, "fresh")
        await store.record_step("fresh", fence, StoredStep.of(step_record("1", '"done"')))
        steps = await store.load_steps("fresh")
        assert steps["1"].output == '"done"'
    finally:
        await store.close()


async def test_the_printed_sql_makes_a_store_that_opens_without_migrating(
    store_url: str,
) -> None:
    sql = await _ddl(store_url)
    assert _footprint(store_url) in (None, ([], [], (0,)))  # printing wrote nothing
    _apply(store_url, sql)
    await _works(store_url)
    assert await _ddl(store_url) == await _ddl(store_url)  # stable
    assert "nothing to apply" in await _ddl(store_url)


async def test_an_old_store_gets_the_sql_of_the_later_migrations_only(store_url: str) -> None:
    _build_old(store_url, OLD)
    sql = await _ddl(store_url)
    assert f"version {OLD} to" in sql
    assert "-- version 1\n" not in sql and f"-- version {OLD + 1}\n" in sql
    _apply(store_url, sql)
    await _works(store_url)
    store = open_store(_no_migrate(store_url))
    await store.open()
    try:
        old = await store.get_run("old")
        assert old is not None and old.status == "pending"  # what it held survives
    finally:
        await store.close()


@pytest.mark.parametrize("old", [False, True], ids=["empty", "old"])
async def test_migrate_false_refuses_a_store_at_another_version_and_writes_nothing(
    store_url: str, old: bool
) -> None:
    from stalwart.stores.postgres.schema import SCHEMA_VERSION as PG_VERSION
    from stalwart.stores.sqlite.schema import SCHEMA_VERSION as LITE_VERSION

    if old:
        _build_old(store_url, OLD)
    before = _footprint(store_url)
    store = open_store(_no_migrate(store_url))
    with pytest.raises(StoreError) as caught:
        await store.open()
    text = str(caught.value)
    sqlite = store_url.startswith("sqlite://")
    needed = LITE_VERSION if sqlite else PG_VERSION
    found = f"schema version {OLD}" if old else "no Stalwart tables (version 0)"
    where = repr(SQLiteStore.from_url(store_url).path) if sqlite else repr(_schema(store_url))
    assert where in text
    assert found in text
    assert f"needs version {needed}" in text
    assert "migrate=false" in text
    assert "`stalwart store ddl --store " in text
    assert _footprint(store_url) == before


async def test_migrate_false_opens_a_store_already_at_the_code_version(store_url: str) -> None:
    migrated = open_store(store_url)
    await migrated.open()
    await migrated.close()
    await _works(store_url)


@pytest.mark.parametrize("value", ["maybe", "", "0"])
def test_a_bad_migrate_value_is_refused_naming_the_option(store_url: str, value: str) -> None:
    with pytest.raises(StoreError, match=r"migrate must be 'true' or 'false', not "):
        open_store(f"{store_url}{'&' if '?' in store_url else '?'}migrate={value}")


def test_migrate_true_is_the_default_spelled_out(store_url: str) -> None:
    store = open_store(f"{store_url}{'&' if '?' in store_url else '?'}migrate=true")
    assert store.migrate is True


async def test_a_memory_store_has_no_tables_to_provision() -> None:
    with pytest.raises(StoreError, match="MemoryStore has no SQL tables"):
        await open_store("memory").ddl()


# Applies a printed script one statement at a time, as a client would, and
# stops half-way, inside the script's transaction, for the test to kill it.
_APPLIER = """
import sys, time
url, script = sys.argv[1], open(sys.argv[2]).read()
chunks = script.split(";\\n")
statements = [
    "\\n".join(line for line in chunk.splitlines() if not line.startswith("--"))
    for chunk in chunks
]
statements = [s for s in statements if s.strip()]
if url.startswith("sqlite://"):
    import sqlite3
    from stalwart.stores.sqlite import SQLiteStore
    conn = sqlite3.connect(SQLiteStore.from_url(url).path, isolation_level=None)
else:
    import psycopg
    conn = psycopg.connect(sys.argv[3], autocommit=True)
for n, statement in enumerate(statements):
    conn.execute(statement.encode() if not url.startswith("sqlite://") else statement)
    if n == len(statements) // 2:
        print("half-way", flush=True)
        time.sleep(600)
"""


async def test_an_apply_killed_half_way_leaves_the_old_version_and_the_same_sql(
    store_url: str, tmp_path: Path
) -> None:
    _build_old(store_url, OLD)
    sql = await _ddl(store_url)
    (tmp_path / "schema.sql").write_text(sql)
    (tmp_path / "apply.py").write_text(_APPLIER)
    before = _footprint(store_url)

    proc = spawn(tmp_path / "apply.py", store_url, tmp_path / "schema.sql", PG_URL)
    try:
        wait_for_line(proc, "half-way")
    finally:
        kill(proc)

    if not store_url.startswith("sqlite://"):
        assert _footprint(store_url) == before  # the server rolled the transaction back
    assert await _ddl(store_url) == sql  # still at OLD: the same migrations to apply
    store = open_store(_no_migrate(store_url))
    with pytest.raises(StoreError, match=f"schema version {OLD},"):
        await store.open()
    _apply(store_url, sql)
    await _works(store_url)
