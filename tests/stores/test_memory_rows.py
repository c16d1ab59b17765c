"""What every store promises of long-term memory's rows (memory, SQLite,
PostgreSQL alike): one row per namespace and key, namespaces apart, text
search by any word, vectors kept for scoring, and a drop that deletes the
namespace's rows and masks its copies in the ledger."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.records import claimed_run, step_record

from stalwart.core.ledger import StepRecord
from stalwart.core.memory import MASKED_ARGS, MemoryRecord, namespace_text
from stalwart.stores.base import SPILL_BYTES, Store
from stalwart.stores.sqlite import SCHEMA_VERSION, SQLiteStore
from stalwart.stores.sqlite.schema import MIGRATIONS

ALICE = namespace_text(("users", "alice"))
BOB = namespace_text(("users", "bob"))


def _row(ns: str, key: str, text: str, vector: list[float] | None = None) -> MemoryRecord:
    now = time.time()
    return MemoryRecord(
        ns,
        key,
        json.dumps(text),
        text,
        None if vector is None else json.dumps(vector),
        now,
        now,
    )


async def test_a_key_holds_one_row_and_a_rewrite_replaces_it(any_store: Store) -> None:
    first = _row(ALICE, "colour", "blue")
    await any_store.memory_put(first)
    again = _row(ALICE, "colour", "green")
    await any_store.memory_put(again)
    found = await any_store.memory_get(ALICE, "colour")
    assert found is not None
    assert (found.value, found.text) == ('"green"', "green")
    assert found.created_at == first.created_at  # the first write's time is kept
    assert [r.key for r in await any_store.memory_list(ALICE, 10)] == ["colour"]
    assert await any_store.memory_get(ALICE, "size") is None


async def test_an_insert_takes_a_free_key_only_and_keeps_the_row_it_finds(
    any_store: Store,
) -> None:
    assert await any_store.memory_insert(_row(ALICE, "claim", "first"))
    assert not await any_store.memory_insert(_row(ALICE, "claim", "second"))
    found = await any_store.memory_get(ALICE, "claim")
    assert found is not None and found.text == "first"
    found_text = await any_store.memory_search_text(ALICE, ["first"], 10)
    assert [r.text for r, _ in found_text] == ["first"]  # searchable as a put row is
    assert await any_store.memory_insert(_row(BOB, "claim", "elsewhere"))  # another namespace


async def test_namespaces_are_apart(any_store: Store) -> None:
    await any_store.memory_put(_row(ALICE, "pet", "a cat named Tom"))
    await any_store.memory_put(_row(BOB, "pet", "a dog named Rex"))
    alice = await any_store.memory_get(ALICE, "pet")
    assert alice is not None and alice.text == "a cat named Tom"
    assert [r.text for r in await any_store.memory_list(BOB, 10)] == ["a dog named Rex"]
    found = await any_store.memory_search_text(BOB, ["cat", "tom"], 10)
    assert found == []
    # A namespace is its exact path: a prefix of it is another namespace.
    assert await any_store.memory_list(namespace_text(("users",)), 10) == []


async def test_text_search_finds_any_word_best_first(any_store: Store) -> None:
    await any_store.memory_put(_row(ALICE, "a", "allergic to peanuts"))
    await any_store.memory_put(_row(ALICE, "b", "peanuts and cashews are banned at home"))
    await any_store.memory_put(_row(ALICE, "c", "prefers window seats"))
    found = await any_store.memory_search_text(ALICE, ["peanuts", "cashews"], 10)
    assert [r.key for r, _ in found] == ["b", "a"]
    assert found[0][1] > found[1][1]
    limited = await any_store.memory_search_text(ALICE, ["peanuts"], 1)
    assert len(limited) == 1
    assert await any_store.memory_search_text(ALICE, ["submarine"], 10) == []


@pytest.mark.parametrize("word", ["and", "or", "not", "near", "x_y", "ünïcode", "a1"])
async def test_a_search_word_is_never_read_as_query_syntax(any_store: Store, word: str) -> None:
    await any_store.memory_put(_row(ALICE, "k", f"some text with {word} in it"))
    await any_store.memory_search_text(ALICE, [word, "text"], 10)  # no syntax error


async def test_a_deleted_key_is_gone_from_reads_and_search(any_store: Store) -> None:
    await any_store.memory_put(_row(ALICE, "a", "likes jazz"))
    assert await any_store.memory_delete(ALICE, "a") is True
    assert await any_store.memory_delete(ALICE, "a") is False
    assert await any_store.memory_get(ALICE, "a") is None
    assert await any_store.memory_search_text(ALICE, ["jazz"], 10) == []


async def test_vectors_are_kept_only_for_rows_that_have_one(any_store: Store) -> None:
    await any_store.memory_put(_row(ALICE, "v", "with a vector", [0.5, 0.25]))
    await any_store.memory_put(_row(ALICE, "t", "text only"))
    rows = await any_store.memory_vectors(ALICE)
    assert [(r.key, json.loads(r.vector or "null")) for r in rows] == [("v", [0.5, 0.25])]


def _memory_step(
    key: str, name: str, ns: tuple[str, ...], output: str, big: bool = False
) -> StepRecord:
    args = {"namespace": list(ns), "key": "k", "value": "x" * (SPILL_BYTES + 10 if big else 3)}
    return step_record(key, output, name=f"stalwart.memory.{name}", args=json.dumps(args))


async def test_a_drop_deletes_the_rows_and_masks_the_ledger_copies(any_store: Store) -> None:
    await any_store.memory_put(_row(ALICE, "a", "allergic to peanuts"))
    await any_store.memory_put(_row(ALICE, "b", "lives in Lyon"))
    await any_store.memory_put(_row(BOB, "a", "allergic to peanuts"))
    fence = await claimed_run(any_store, "r")
    big_output = json.dumps([{"key": "a", "value": "y" * (SPILL_BYTES + 10)}])
    records = [
        _memory_step("1", "put", ("users", "alice"), "null", big=True),
        _memory_step("2", "get", ("users", "alice"), '{"value":"allergic to peanuts"}'),
        _memory_step("3", "search", ("users", "alice"), big_output),
        _memory_step("4", "put", ("users", "bob"), "null"),
        step_record("5", '"allergic"', name="lookup", args='{"namespace":["users","alice"]}'),
    ]
    for rec in records:
        await any_store.record_step("r", fence, rec)

    assert await any_store.memory_drop(ALICE) == (2, 3)

    assert await any_store.memory_list(ALICE, 10) == []
    assert await any_store.memory_search_text(ALICE, ["peanuts"], 10) == []
    assert [r.key for r in await any_store.memory_list(BOB, 10)] == ["a"]
    steps = await any_store.load_steps("r")
    masked = {k: (s.args, s.output) for k, s in steps.items() if s.args == MASKED_ARGS}
    # Reads replay as if the namespace were empty; a write keeps its null.
    assert masked == {
        "1": (MASKED_ARGS, "null"),
        "2": (MASKED_ARGS, "null"),
        "3": (MASKED_ARGS, "[]"),
    }
    assert "bob" in (steps["4"].args or "")  # another namespace's record is kept
    assert steps["5"].args == '{"namespace":["users","alice"]}'  # not a memory step
    assert all(s.args_hash == "h" for s in steps.values())  # replay still checks them
    assert await any_store.memory_drop(ALICE) == (0, 0)  # done again: nothing left


async def test_a_drop_leaves_no_spilled_copy_in_the_file(sqlite_store: SQLiteStore) -> None:
    fence = await claimed_run(sqlite_store, "r")
    await sqlite_store.record_step(
        "r", fence, _memory_step("1", "put", ("users", "alice"), "null", big=True)
    )
    await sqlite_store.memory_drop(ALICE)
    left = sqlite_store.db.execute("SELECT count(*) FROM payloads").fetchone()[0]
    spilled = sqlite_store.db.execute("SELECT spilled FROM steps").fetchone()[0]
    assert (left, spilled) == (0, 0)


async def test_a_file_from_before_memory_opens_and_gains_its_tables(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE stalwart_schema (version INTEGER NOT NULL)")
        for version in range(1, 7):
            db.executescript(MIGRATIONS[version])
            db.execute("INSERT INTO stalwart_schema VALUES (?)", (version,))
    store = SQLiteStore(path)
    await store.open()
    try:
        await store.memory_put(_row(ALICE, "a", "kept after the upgrade"))
        found = await store.memory_search_text(ALICE, ["upgrade"], 5)
        assert [r.key for r, _ in found] == ["a"]
        versions = [v for (v,) in store.db.execute("SELECT version FROM stalwart_schema")]
    finally:
        await store.close()
    assert sorted(versions) == list(range(1, SCHEMA_VERSION + 1))


async def test_a_postgres_schema_from_before_memory_gains_its_table(
    pg_fresh_schema: str, pg_url: Callable[..., str]
) -> None:
    import psycopg
    from tests.conftest import PG_URL

    from stalwart.stores.postgres import SCHEMA_VERSION as PG_VERSION
    from stalwart.stores.postgres import PostgresStore
    from stalwart.stores.postgres.schema import MIGRATIONS as PG_MIGRATIONS

    s = f'"{pg_fresh_schema}"'
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {s}")
        conn.execute(
            f"CREATE TABLE {s}.stalwart_schema (version INTEGER PRIMARY KEY, "
            "applied_at DOUBLE PRECISION NOT NULL)"
        )
        for version in range(1, 6):
            for statement in PG_MIGRATIONS[version]:
                conn.execute(statement.format(s=s))
            conn.execute(f"INSERT INTO {s}.stalwart_schema VALUES (%s, 0)", (version,))
    store = PostgresStore.from_url(pg_url(pg_fresh_schema))
    await store.open()
    try:
        await store.memory_put(_row(ALICE, "a", "kept after the upgrade"))
        found = await store.memory_search_text(ALICE, ["upgrade"], 5)
        assert [r.key for r, _ in found] == ["a"]
    finally:
        await store.close()
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(f"SELECT version FROM {s}.stalwart_schema ORDER BY 1").fetchall()
    assert [v for (v,) in rows] == list(range(1, PG_VERSION + 1))
