"""Runs carry tags every store keeps and filters by (stalwart.core.tags)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from stalwart.core.ledger import RunRecord
from stalwart.core.tags import decode_tags, encode_tags
from stalwart.stores.base import Store
from stalwart.stores.sqlite import SQLiteStore
from stalwart.stores.sqlite.schema import MIGRATIONS, SCHEMA_VERSION


def _run(run_id: str, at: float, **tags: str) -> RunRecord:
    return RunRecord(
        run_id, "p", "{}", created_at=at, updated_at=at, tags=encode_tags(tags) or None
    )


async def test_list_runs_keeps_the_runs_that_have_every_tag_asked(any_store: Store) -> None:
    await any_store.create_run(_run("a", 1.0, customer="c-42", tier="gold"))
    await any_store.create_run(_run("b", 2.0, customer="c-42"))
    await any_store.create_runs([_run("c", 3.0, customer="c-7"), _run("d", 4.0)])

    async def ids(**tags: str) -> list[str]:
        return [r.id for r in await any_store.list_runs(tags=tags)]

    assert await ids(customer="c-42") == ["b", "a"]
    assert await ids(customer="c-42", tier="gold") == ["a"]
    assert await ids(customer="c-7") == ["c"]
    assert await ids(customer="nobody") == []
    assert await ids() == ["d", "c", "b", "a"]
    got = await any_store.get_run("a")
    assert got is not None and decode_tags(got.tags) == {"customer": "c-42", "tier": "gold"}
    counted = await any_store.count_runs(tags={"customer": "c-42"})
    assert counted == {"pending": {"default": 2}}


async def test_a_repeated_create_keeps_the_first_runs_tags(any_store: Store) -> None:
    await any_store.create_run(_run("a", 1.0, customer="c-1"))
    stored, new = await any_store.create_run(_run("a", 1.0, customer="c-2"))
    await any_store.create_runs([_run("a", 1.0, customer="c-3"), _run("b", 2.0, customer="c-3")])
    assert not new and decode_tags(stored.tags) == {"customer": "c-1"}
    assert [r.id for r in await any_store.list_runs(tags={"customer": "c-2"})] == []
    assert [r.id for r in await any_store.list_runs(tags={"customer": "c-3"})] == ["b"]


async def test_a_pruned_run_leaves_no_tag_behind(any_store: Store) -> None:
    await any_store.create_run(_run("a", 1.0, customer="c-1"))
    await any_store.finish_run("a", 0, "succeeded", "null", None)
    assert await any_store.prune(keep=0) == 1
    await any_store.create_run(_run("b", 2.0, customer="c-1"))
    assert [r.id for r in await any_store.list_runs(tags={"customer": "c-1"})] == ["b"]


async def test_an_exported_run_keeps_its_tags_in_another_store(any_store: Store) -> None:
    await any_store.create_run(_run("a", 1.0, customer="c-1"))
    dump = await any_store.export_run("a")
    assert dump is not None
    dump.run.id = "copy"
    assert await any_store.import_run(dump)
    found = await any_store.list_runs(tags={"customer": "c-1"})
    assert sorted(r.id for r in found) == ["a", "copy"]


async def test_tag_values_are_plain_data_in_sql(any_store: Store) -> None:
    hostile = {"k": "x' OR '1'='1", "q": '"); DROP TABLE runs; --'}
    await any_store.create_run(_run("a", 1.0, **hostile))
    await any_store.create_run(_run("b", 2.0))
    assert [r.id for r in await any_store.list_runs(tags={"k": "x' OR '1'='1"})] == ["a"]
    assert [r.id for r in await any_store.list_runs(tags=hostile)] == ["a"]
    assert len(await any_store.list_runs()) == 2


async def test_a_file_from_before_tags_opens_and_gains_them(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE stalwart_schema (version INTEGER NOT NULL)")
        for version in range(1, SCHEMA_VERSION):
            db.executescript(MIGRATIONS[version])
            db.execute("INSERT INTO stalwart_schema VALUES (?)", (version,))
        db.execute(
            "INSERT INTO runs (id, policy, inputs, status, created_at, updated_at) "
            "VALUES ('old', 'p', '{}', 'pending', 1, 1)"
        )
    store = SQLiteStore(path)
    await store.open()
    try:
        old = await store.get_run("old")
        assert old is not None and old.tags is None
        await store.create_run(_run("new", 2.0, customer="c-1"))
        assert [r.id for r in await store.list_runs(tags={"customer": "c-1"})] == ["new"]
    finally:
        await store.close()


@pytest.mark.parametrize("count", [0, 1])
def test_encoded_tags_are_sorted_and_none_when_empty(count: int) -> None:
    tags = {"b": "2", "a": "1"} if count else {}
    assert encode_tags(tags) == ('{"a":"1","b":"2"}' if count else None)


async def test_prune_by_tag_deletes_only_the_finished_runs_that_have_it(any_store: Store) -> None:
    for i, customer in enumerate(["c-1", "c-1", "c-2"]):
        await any_store.create_run(_run(f"r{i}", float(i), customer=customer))
        await any_store.finish_run(f"r{i}", 0, "succeeded", "null", None)
    await any_store.create_run(_run("live", 9.0, customer="c-1"))
    assert await any_store.prune(keep=0, tags={"customer": "c-1"}) == 2
    assert sorted(r.id for r in await any_store.list_runs()) == ["live", "r2"]
    assert await any_store.prune(older_than=1e12, tags={"customer": "c-2"}) == 1
