"""Runs are found by the words of their inputs, results and errors, through
each store's own full-text index (stalwart.stores.search)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tests.conftest import opened_store, pg_schema_url

from stalwart.core.codec import dumps
from stalwart.core.errors import StoreError
from stalwart.core.ledger import RunRecord
from stalwart.stores.base import Store
from stalwart.stores.search import SEARCH_CHARS
from stalwart.stores.sqlite import SQLiteStore
from stalwart.stores.sqlite.schema import MIGRATIONS, SCHEMA_VERSION


def _run(run_id: str, at: float, inputs: object, policy: str = "p") -> RunRecord:
    return RunRecord(run_id, policy, dumps(inputs), created_at=at, updated_at=at)


async def _ids(store: Store, text: str, **filters: object) -> list[str]:
    return [r.id for r in await store.list_runs(text=text, **filters)]  # type: ignore[arg-type]


async def test_a_run_is_found_by_every_word_of_its_inputs_result_and_error(
    any_store: Store,
) -> None:
    await any_store.create_run(_run("a", 1.0, {"question": "Please REFUND order-1234"}))
    await any_store.create_run(_run("b", 2.0, {"question": "ship order 99", "n": 1234}))
    await any_store.create_runs([_run("c", 3.0, ["Été à Paris\nfoo_bar"])])
    assert await _ids(any_store, "refund") == ["a"]
    assert await _ids(any_store, "order 1234") == ["b", "a"]
    assert await _ids(any_store, "refund 99") == []
    assert await _ids(any_store, "été paris") == ["c"]  # JSON escapes are read as text
    assert await _ids(any_store, "FOO bar") == ["c"]
    assert await _ids(any_store, "refun") == []  # whole words only

    await any_store.finish_run("b", 0, "succeeded", dumps({"answer": "shipped by courier"}), None)
    err = json.dumps({"type": "ValueError", "message": "card declined twice"})
    await any_store.finish_run("c", 0, "failed", None, err)
    assert await _ids(any_store, "courier") == ["b"]
    assert await _ids(any_store, "declined") == ["c"]
    assert await _ids(any_store, "order", status="succeeded") == ["b"]
    assert await _ids(any_store, "order", before=(2.0, "b")) == ["a"]


async def test_keys_and_literals_are_not_words(any_store: Store) -> None:
    await any_store.create_run(_run("a", 1.0, {"customer": True, "note": None}))
    assert await _ids(any_store, "customer") == []
    assert await _ids(any_store, "true") == []
    assert await _ids(any_store, "null") == []


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ('"refund"', ["a"]),
        ("refund*", ["a"]),
        ("NEAR(refund", []),  # "near" is a word, and only b has it
        ("refund AND", []),
        ("OR refund", []),
        ("refund') --", ["a"]),
        ('re"fund', []),
        ("100%", []),
    ],
)
async def test_query_syntax_in_the_text_is_only_words(
    any_store: Store, query: str, found: list[str]
) -> None:
    await any_store.create_run(_run("a", 1.0, {"q": "refund please"}))
    await any_store.create_run(_run("b", 2.0, {"q": "AND OR NEAR"}))
    assert await _ids(any_store, query) == found
    assert await _ids(any_store, "and or near") == ["b"]


@pytest.mark.parametrize("query", ['"', "*", "  ", "()", "_"])
async def test_a_text_with_no_word_is_refused_by_name(any_store: Store, query: str) -> None:
    with pytest.raises(ValueError, match="has no word"):
        await any_store.list_runs(text=query)


async def test_words_past_the_searched_length_are_not_found(any_store: Store) -> None:
    filler = "x " * (SEARCH_CHARS // 2)
    await any_store.create_run(_run("a", 1.0, {"q": "early " + filler + " late"}))
    assert await _ids(any_store, "early") == ["a"]
    assert await _ids(any_store, "late") == []


async def test_a_pruned_run_is_no_longer_found(any_store: Store) -> None:
    await any_store.create_run(_run("a", 1.0, {"q": "refund"}))
    await any_store.finish_run("a", 0, "succeeded", "null", None)
    assert await any_store.prune(keep=0) == 1
    await any_store.create_run(_run("b", 2.0, {"q": "other"}))
    assert await _ids(any_store, "refund") == []
    assert await _ids(any_store, "other") == ["b"]


async def test_an_imported_run_is_found_by_its_words(any_store: Store) -> None:
    await any_store.create_run(_run("a", 1.0, {"q": "refund"}))
    dump = await any_store.export_run("a")
    assert dump is not None
    dump.run.id = "copy"
    assert await any_store.import_run(dump)
    assert sorted(await _ids(any_store, "refund")) == ["a", "copy"]


async def test_an_encrypted_store_refuses_text_search_by_name(tmp_path: Path) -> None:
    from tests.stores.encryption.conftest import encrypted

    store = encrypted(f"sqlite:///{tmp_path / 'x.db'}")
    await store.open()
    try:
        await store.create_run(_run("a", 1.0, {"q": "refund"}))
        assert not store.text_search and store.inner.text_search
        with pytest.raises(StoreError, match="sealed"):
            await store.list_runs(text="refund")
        assert [r.id for r in await store.list_runs()] == ["a"]  # other filters work
    finally:
        await store.close()


async def test_a_version_9_file_gains_the_index_of_the_runs_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE stalwart_schema (version INTEGER NOT NULL)")
        for version in range(1, 10):
            script = MIGRATIONS[version]
            assert isinstance(script, str)
            db.executescript(script)
            db.execute("INSERT INTO stalwart_schema VALUES (?)", (version,))
        db.execute(
            "INSERT INTO runs (id, policy, inputs, status, result, created_at, updated_at) "
            """VALUES ('old', 'p', '{"q":"refund"}', 'succeeded', '"paid"', 1, 1)"""
        )
    store = SQLiteStore(path)
    await store.open()
    try:
        assert SCHEMA_VERSION == 10
        assert await _ids(store, "refund paid") == ["old"]
        await store.create_run(_run("new", 2.0, {"q": "refund"}))
        assert await _ids(store, "refund") == ["new", "old"]
        assert "CREATE VIRTUAL TABLE run_text" not in await store.ddl()  # applied
    finally:
        await store.close()


async def test_a_version_8_schema_gains_the_index_of_the_runs_it_holds(
    pg_fresh_schema: str,
) -> None:
    import psycopg

    from stalwart.stores.postgres.schema import MIGRATIONS as PG_MIGRATIONS
    from stalwart.stores.postgres.schema import SCHEMA_VERSION as PG_VERSION

    s = f'"{pg_fresh_schema}"'
    url = pg_schema_url(pg_fresh_schema)
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {s}")
        conn.execute(
            f"CREATE TABLE {s}.stalwart_schema (version INTEGER PRIMARY KEY, "
            "applied_at DOUBLE PRECISION NOT NULL)"
        )
        for version in range(1, 9):
            for statement in PG_MIGRATIONS[version]:
                conn.execute(statement.format(s=s))
            conn.execute(f"INSERT INTO {s}.stalwart_schema VALUES (%s, 0)", (version,))
        conn.execute(
            f"INSERT INTO {s}.runs (id, policy, inputs, status, result, created_at, updated_at) "
            """VALUES ('old', 'p', '{"q":"refund"}', 'succeeded', '"paid"', 1, 1)"""
        )
    async for store in opened_store(url):
        assert PG_VERSION == 9
        assert await _ids(store, "refund paid") == ["old"]
        await store.create_run(_run("new", 2.0, {"q": "refund"}))
        assert await _ids(store, "refund") == ["new", "old"]


def test_the_ddl_creates_the_text_index_and_its_triggers() -> None:
    from stalwart.stores.postgres.schema import ddl as pg_ddl
    from stalwart.stores.sqlite.schema import ddl as sqlite_ddl

    lite = sqlite_ddl(9, "x.db")
    assert "CREATE VIRTUAL TABLE run_text USING fts5" in lite
    assert lite.count("CREATE TRIGGER run_text_") == 3
    pg = pg_ddl(8, '"s"', "s", "h")
    assert 'CREATE TABLE "s".run_text' in pg and "USING GIN (search)" in pg
    assert pg.count("CREATE TRIGGER run_text_") == 3


async def test_a_search_finds_every_run_of_a_large_batch(any_store: Store) -> None:
    runs = [_run(f"r{i:05}", float(i), {"q": f"bulk {i}"}) for i in range(2_500)]
    for lo in range(0, len(runs), 1_000):
        await any_store.create_runs(runs[lo : lo + 1_000])
    assert len(await any_store.list_runs(limit=3_000, text="bulk")) == 2_500
    assert await _ids(any_store, "bulk 1234") == ["r01234"]
