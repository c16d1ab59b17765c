"""``stalwart store ddl``, run as the real command: its SQL, applied by the
database's own client, provisions a store the application then opens with
``migrate=false``; such a store not provisioned is refused by every command
with the line that says what to run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.cli.conftest import run_cli
from tests.conftest import PG_URL

from stalwart.stores import open_store
from stalwart.stores.sqlite import SQLiteStore


def _apply(url: str, sql: str) -> None:
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


def _no_migrate(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}migrate=false"


def test_the_printed_sql_provisions_a_store_the_commands_then_use(
    tmp_path: Path, store_url: str
) -> None:
    sqlite = store_url.startswith("sqlite://")
    if sqlite:  # the operator's empty file: the CLI opens no missing file
        Path(SQLiteStore.from_url(store_url).path).touch()
    refused = run_cli(tmp_path, "runs", "count", "--store", _no_migrate(store_url))
    assert refused.returncode == 1
    assert "no Stalwart tables (version 0)" in refused.stderr
    assert "`stalwart store ddl --store " in refused.stderr
    if sqlite:
        assert Path(SQLiteStore.from_url(store_url).path).stat().st_size == 0

    printed = run_cli(tmp_path, "store", "ddl", "--store", store_url)
    assert printed.returncode == 0, printed.stderr
    assert "CREATE TABLE" in printed.stdout and "stalwart_schema" in printed.stdout
    _apply(store_url, printed.stdout)

    counted = run_cli(tmp_path, "runs", "count", "--store", _no_migrate(store_url), "--json")
    assert counted.returncode == 0, counted.stderr
    again = run_cli(tmp_path, "store", "ddl", "--store", store_url)
    assert again.returncode == 0 and "nothing to apply" in again.stdout


async def test_an_old_sqlite_file_gets_its_migrations_and_keeps_its_runs(tmp_path: Path) -> None:
    from stalwart.stores.sqlite.schema import MIGRATIONS

    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE stalwart_schema (version INTEGER NOT NULL)")
    for version in (1, 2, 3, 4):
        db.executescript(MIGRATIONS[version])
        db.execute("INSERT INTO stalwart_schema VALUES (?)", (version,))
    db.execute(
        "INSERT INTO runs (id, policy, inputs, status, created_at, updated_at) "
        "VALUES ('kept', 'p', '{}', 'pending', 1, 1)"
    )
    db.close()
    url = f"sqlite:///{path}"

    printed = run_cli(tmp_path, "store", "ddl", "--store", url)
    assert printed.returncode == 0, printed.stderr
    assert "-- version 4\n" not in printed.stdout and "-- version 5\n" in printed.stdout
    _apply(url, printed.stdout)
    store = open_store(_no_migrate(url))
    await store.open()
    try:
        run = await store.get_run("kept")
        assert run is not None and run.status == "pending"
    finally:
        await store.close()


@pytest.mark.parametrize("command", [("store", "ddl"), ("runs", "count")])
def test_a_bad_migrate_value_is_one_error_line_naming_the_option(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    done = run_cli(tmp_path, *command, "--store", f"sqlite:///{tmp_path}/x.db?migrate=no")
    assert done.returncode == 1
    assert done.stderr.strip() == "error: migrate must be 'true' or 'false', not 'no'"
