"""The store reads an inspector and ``--json`` listings are built on, and the
drift closed between the two SQL stores. Both stores, a real file and a real
server.

* ``list_runs``: newest first by ``(created_at, id)``; a keyset cursor
  (``before``) pages through every run exactly once; filters combine;
  ``id_contains`` is literal text (``%`` and ``_`` are not wildcards); an
  index serves the listing and the status filter (no sort, no full scan).
* ``count_runs``: ``{status: {queue: count}}``.
* ``waiting_for_signals``: suspended runs waiting for a signal, not for a
  timer or for children, the longest waiting first.
* Idempotent signals on both stores: a send repeated with its ``uid`` is
  kept once, and is not refused when the run finished in between.
* ``set_queue`` without limits removes them on both stores.
* The same tables with the same column names on both stores.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

import pytest

from stalwart.core.errors import StoreError
from stalwart.core.ledger import CHILDREN_WAIT, RunRecord
from stalwart.stores import open_store
from stalwart.stores.base import Store
from stalwart.stores.sql import SQLITE, Statements, postgres

A = "elsewhere:1:a"  # an owner on another host: only its lease counts


def _run(run_id: str, created_at: float, **kw: Any) -> RunRecord:
    return RunRecord(run_id, kw.pop("policy", "p"), "{}", created_at=created_at, **kw)


# -- list_runs ---------------------------------------------------------------------
async def test_runs_are_listed_newest_first_ties_broken_by_id(store: Store) -> None:
    await store.create_runs(
        [_run("b", 2.0), _run("a", 2.0), _run("c", 1.0), _run("d", 3.0), _run("e", 2.0)]
    )
    assert [r.id for r in await store.list_runs()] == ["d", "e", "b", "a", "c"]
    assert [r.id for r in await store.list_runs(limit=2, offset=2)] == ["b", "a"]  # old callers


async def test_a_keyset_cursor_pages_through_every_run_once(store: Store) -> None:
    # Many runs share a timestamp: a cursor on created_at alone would skip
    # or repeat them at a page boundary.
    runs = [_run(f"r{i:03}", float(i // 7)) for i in range(100)]
    await store.create_runs(runs)
    seen: list[str] = []
    before: tuple[float, str] | None = None
    while True:
        page = await store.list_runs(limit=9, before=before)
        if not page:
            break
        seen += [r.id for r in page]
        before = (page[-1].created_at, page[-1].id)
    expected = [r.id for r in sorted(runs, key=lambda r: (r.created_at, r.id), reverse=True)]
    assert seen == expected
    # The same pages by offset, for callers that still use it.
    by_offset = [r.id for i in range(0, 100, 9) for r in await store.list_runs(limit=9, offset=i)]
    assert by_offset == expected


async def test_listing_filters_combine(store: Store) -> None:
    await store.create_runs(
        [
            _run("order-1", 10.0, queue="mail", policy="send"),
            _run("order-2", 20.0, queue="mail", policy="check"),
            _run("order-3", 30.0, queue="bulk", policy="send"),
            _run("other-4", 40.0, queue="mail", policy="send"),
        ]
    )
    await store.request_cancel("order-1")

    async def ids(**kw: Any) -> list[str]:
        return [r.id for r in await store.list_runs(**kw)]

    assert await ids(queue="mail") == ["other-4", "order-2", "order-1"]
    assert await ids(policy="send") == ["other-4", "order-3", "order-1"]
    assert await ids(queue="mail", policy="send") == ["other-4", "order-1"]
    assert await ids(status="cancelled") == ["order-1"]
    assert await ids(status="pending", queue="mail") == ["other-4", "order-2"]
    assert await ids(id_contains="der-") == ["order-3", "order-2", "order-1"]
    assert await ids(created_after=20.0) == ["other-4", "order-3", "order-2"]  # inclusive
    assert await ids(created_before=30.0) == ["order-2", "order-1"]  # exclusive
    assert await ids(created_after=15.0, created_before=35.0, policy="send") == ["order-3"]


async def test_id_contains_is_literal_text(store: Store) -> None:
    await store.create_runs(
        [
            _run("50%_off", 1.0),
            _run("50x_off", 2.0),
            _run("500 off", 3.0),
            _run("a_b", 4.0),
            _run("aXb", 5.0),
            _run("ORDER", 6.0),
        ]
    )

    async def ids(text: str) -> list[str]:
        return [r.id for r in await store.list_runs(id_contains=text)]

    assert await ids("50%") == ["50%_off"]  # % is not "anything"
    assert await ids("%") == ["50%_off"]
    assert await ids("a_b") == ["a_b"]  # _ is not "any character"
    assert await ids("_") == ["a_b", "50x_off", "50%_off"]
    assert await ids("order") == []  # case matters, on both stores
    assert await ids("RDE") == ["ORDER"]


# -- the index behind the listing ----------------------------------------------------
_LISTINGS: list[dict[str, Any]] = [
    {},
    {"status": "pending"},
    {"before": (500.0, "r000500")},
    {"status": "pending", "before": (500.0, "r000500")},
]


def _listing_sql(statements: Statements, kw: dict[str, Any]) -> tuple[str, list[Any]]:
    args: dict[str, Any] = {
        "status": None,
        "limit": 50,
        "offset": 0,
        "queue": None,
        "policy": None,
        "id_contains": None,
        "created_after": None,
        "created_before": None,
        "before": None,
    }
    return statements.list_runs(**{**args, **kw})


async def test_an_index_serves_the_listing_on_sqlite(sqlite_url: str) -> None:
    s = open_store(sqlite_url)
    assert s is not None
    await s.open()
    try:
        await s.create_runs(
            [
                _run(f"r{i:06}", float(i), status="pending" if i % 3 else "succeeded")
                for i in range(5000)
            ]
        )
    finally:
        await s.close()
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    db.execute("ANALYZE")
    for kw in _LISTINGS:
        sql, params = _listing_sql(Statements(SQLITE), kw)
        plan = " | ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params))
        assert "USING INDEX runs_" in plan, (kw, plan)
        assert "TEMP B-TREE" not in plan, (kw, plan)  # no sort of the whole table
    db.close()


async def test_an_index_serves_the_listing_on_postgres(store_url: str) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("the PostgreSQL half")
    s = open_store(store_url)
    assert s is not None
    await s.open()
    try:
        await s.create_runs(
            [
                _run(f"r{i:06}", float(i), status="pending" if i % 3 else "succeeded")
                for i in range(20000)
            ]
        )
    finally:
        await s.close()
    import psycopg

    schema = store_url.rsplit("schema=", 1)[1]
    with psycopg.connect(store_url.split("?")[0], autocommit=True) as conn:
        conn.execute(f'ANALYZE "{schema}".runs')
        for kw in _LISTINGS:
            sql, params = _listing_sql(Statements(postgres(f'"{schema}"')), kw)
            (plan,) = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()  # type: ignore[misc]
            text = json.dumps(plan)
            assert '"Index Name": "runs_' in text, (kw, text)
            assert '"Node Type": "Sort"' not in text, (kw, text)
            assert '"Node Type": "Seq Scan"' not in text, (kw, text)


# -- count_runs ----------------------------------------------------------------------
async def test_runs_are_counted_by_status_then_queue(store: Store) -> None:
    assert await store.count_runs() == {}
    await store.create_runs(
        [
            _run("a", 1.0, queue="mail"),
            _run("b", 2.0, queue="mail"),
            _run("c", 3.0, queue="bulk", policy="other"),
            _run("d", 4.0),
        ]
    )
    await store.request_cancel("b")
    assert await store.count_runs() == {
        "pending": {"mail": 1, "bulk": 1, "default": 1},
        "cancelled": {"mail": 1},
    }
    assert await store.count_runs(queue="mail") == {
        "pending": {"mail": 1},
        "cancelled": {"mail": 1},
    }
    assert await store.count_runs(policy="other") == {"pending": {"bulk": 1}}
    assert await store.count_runs(queue="mail", policy="other") == {}


# -- waiting_for_signals -------------------------------------------------------------
async def _suspend(
    store: Store, run: RunRecord, wake_at: float | None, waiting_for: str | None
) -> None:
    await store.create_run(run)
    claimed = await store.claim(run.id, A, 60.0)
    assert claimed is not None
    assert await store.suspend_run(run.id, claimed.fence, wake_at, waiting_for)


async def test_runs_waiting_for_a_signal_are_listed_longest_waiting_first(store: Store) -> None:
    await store.create_run(_run("pending", 1.0))
    await _suspend(store, _run("late", 1.0), None, "approve")  # created first, waits since later
    await asyncio.sleep(0.02)
    await _suspend(store, _run("sleeper", 2.0), 10**10, None)
    await store.create_run(_run("parent~1/0", 3.0, parent_id="parent"))  # an unfinished child
    await _suspend(store, _run("parent", 3.0), 10**10, f"{CHILDREN_WAIT}parent~1/")
    await asyncio.sleep(0.02)
    await _suspend(store, _run("timed", 4.0), 10**10, "go")  # a signal wait with a timeout
    await asyncio.sleep(0.02)
    await _suspend(store, _run("answered", 0.5), None, "go")
    await store.send_signal("answered", "go", "1")  # woken: pending again

    waiting = await store.waiting_for_signals()
    assert [(r.id, r.waiting_for) for r in waiting] == [("late", "approve"), ("timed", "go")]
    assert [r.id for r in await store.waiting_for_signals(limit=1)] == ["late"]
    assert (await store.get_run("parent")).status == "suspended"  # type: ignore[union-attr]


# -- idempotent signals (the same on both stores) ------------------------------------
async def test_a_send_repeated_with_its_uid_is_kept_once(store: Store) -> None:
    await store.create_run(_run("r", 1.0))
    for _ in range(3):  # a caller retrying a send whose reply it lost
        await store.send_signal("r", "go", '"once"', uid="send-1")
    await store.send_signal("r", "go", '"twice"')  # another send: another signal
    assert await store.take_signal("r", "go", "1") == '"once"'
    assert await store.take_signal("r", "go", "2") == '"twice"'
    assert await store.take_signal("r", "go", "3") is None


async def test_a_retried_send_is_not_refused_when_the_run_finished_since(store: Store) -> None:
    await store.create_run(_run("r", 1.0))
    await store.send_signal("r", "go", "1", uid="send-1")
    claimed = await store.claim("r", A, 60.0)
    assert claimed is not None
    await store.finish_run("r", claimed.fence, "succeeded", "null", None)
    rec = await store.send_signal("r", "go", "1", uid="send-1")
    assert rec.status == "succeeded"
    with pytest.raises(StoreError, match="takes no signals"):
        await store.send_signal("r", "go", "1", uid="send-2")


# -- set_queue (the same on both stores) ---------------------------------------------
async def test_a_queue_set_without_limits_has_none(store: Store) -> None:
    await store.set_queue("q", concurrency=1)
    await store.create_runs([_run(f"r{i}", float(i), queue="q") for i in range(3)])
    assert len(await store.claim_due(A, 60.0, 10, lambda r: True, ["q"])) == 1
    await store.set_queue("q")  # limits removed
    assert len(await store.claim_due(A, 60.0, 10, lambda r: r.status != "running", ["q"])) == 2
    with pytest.raises(ValueError, match="at least 1"):
        await store.set_queue("q", concurrency=0)


# -- one schema -----------------------------------------------------------------------
_TABLES = ("runs", "steps", "payloads", "signals", "queues")


async def test_both_stores_have_the_same_columns(sqlite_url: str, store_url: str) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("compares SQLite with PostgreSQL")
    for url in (sqlite_url, store_url):
        s = open_store(url)
        assert s is not None
        await s.open()
        await s.close()
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    lite = {t: sorted(row[1] for row in db.execute(f"PRAGMA table_info({t})")) for t in _TABLES}
    db.close()
    import psycopg

    schema = store_url.rsplit("schema=", 1)[1]
    with psycopg.connect(store_url.split("?")[0]) as conn:
        pg = {
            t: sorted(
                row[0]
                for row in conn.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = %s",
                    (schema, t),
                )
            )
            for t in _TABLES
        }
    assert lite == pg
    assert "refilled_at" in lite["queues"] and "uid" in lite["signals"]


async def test_a_version_2_sqlite_file_keeps_its_queues_and_signals(tmp_path: Any) -> None:
    """Schema 3 renames SQLite's ``queues.updated_at`` to PostgreSQL's
    ``refilled_at`` and gives signals a ``uid``: what a file held survives."""
    from stalwart.stores.sqlite import SQLiteStore
    from stalwart.stores.sqlite.schema import MIGRATIONS

    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE stalwart_schema (version INTEGER NOT NULL)")
    for version in (1, 2):
        db.executescript(MIGRATIONS[version])
        db.execute("INSERT INTO stalwart_schema VALUES (?)", (version,))
    db.execute(
        "INSERT INTO runs (id, policy, inputs, status, created_at, updated_at, queue) "
        "VALUES ('r', 'p', '{}', 'pending', 1, 1, 'q')"
    )
    db.execute("INSERT INTO queues (name, concurrency) VALUES ('q', 1)")
    db.execute("INSERT INTO queues (name) VALUES ('unlimited')")  # v2 kept such rows
    db.execute(
        "INSERT INTO signals (run_id, name, payload, created_at) VALUES ('r', 'go', '\"hi\"', 1)"
    )
    db.close()

    store = SQLiteStore(path)
    await store.open()
    try:
        assert await store.take_signal("r", "go", "1") == '"hi"'
        await store.create_run(_run("r2", 2.0, queue="q"))
        claimed = await store.claim_due(A, 60.0, 10, lambda r: True, ["q"])
        assert len(claimed) == 1  # concurrency 1 still holds
        names = [n for (n,) in store.db.execute("SELECT name FROM queues")]
        assert names == ["q"]
    finally:
        await store.close()
