"""``Store.create_runs``: many runs in one transaction, ids that exist kept.

What a batch enqueue relies on, on every store (memory, a real SQLite file, a
real PostgreSQL server): new runs are created; a run that existed is left as
it was and handed back as stored, so the caller can hold the id to the same
call; an id given twice is created once, from its first record; and the batch
is one transaction (all of it or none).
"""

from __future__ import annotations

import pytest

from stalwart.core.errors import StoreError
from stalwart.core.ledger import RunRecord
from stalwart.stores import open_store
from stalwart.stores.base import Store


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def _run(run_id: str, inputs: str = "{}", **kw: object) -> RunRecord:
    return RunRecord(run_id, "p", inputs, queue="q", **kw)  # type: ignore[arg-type]


async def test_new_runs_are_created_and_nothing_is_reported_existing(store: Store) -> None:
    existed = await store.create_runs([_run(f"r{i}", f'{{"i": {i}}}') for i in range(10)])
    assert existed == []
    got = {r.id: r for r in await store.get_runs([f"r{i}" for i in range(10)])}
    assert sorted(got) == sorted(f"r{i}" for i in range(10))
    assert got["r7"].inputs == '{"i": 7}' and got["r7"].status == "pending"
    assert got["r7"].queue == "q"


async def test_existing_runs_are_kept_and_returned_as_stored(store: Store) -> None:
    await store.create_runs([_run("old", '{"v": "first"}')])
    existed = await store.create_runs([_run("new1"), _run("old", '{"v": "second"}'), _run("new2")])
    assert [(r.id, r.inputs) for r in existed] == [("old", '{"v": "first"}')]
    kept = await store.get_run("old")
    assert kept is not None and kept.inputs == '{"v": "first"}'  # not overwritten
    assert {r.id for r in await store.get_runs(["new1", "new2"])} == {"new1", "new2"}
    # An existing run created by create_run is seen the same way.
    await store.create_run(_run("single", '{"s": 1}'))
    again = await store.create_runs([_run("single", '{"s": 2}')])
    assert [(r.id, r.inputs) for r in again] == [("single", '{"s": 1}')]


async def test_an_id_given_twice_is_created_once_from_its_first_record(store: Store) -> None:
    existed = await store.create_runs([_run("d", '{"n": 1}'), _run("x"), _run("d", '{"n": 2}')])
    assert existed == []  # neither copy existed before the batch
    d = await store.get_run("d")
    assert d is not None and d.inputs == '{"n": 1}'
    assert len(await store.list_runs(limit=10)) == 2


async def test_a_large_batch_spans_statements_and_finds_existing_ids_in_any(
    store: Store,
) -> None:
    # PostgreSQL sends a thousand rows a statement: existing ids in the third
    # statement must still be found.
    await store.create_runs([_run("e2100"), _run("e5")])
    batch = [_run(f"e{i}", '{"new": true}') for i in range(2500)]
    existed = await store.create_runs(batch)
    assert sorted(r.id for r in existed) == ["e2100", "e5"]
    assert all(r.inputs == "{}" for r in existed)
    assert len(await store.get_runs([r.id for r in batch])) == 2500


async def test_an_empty_batch_writes_nothing(store: Store) -> None:
    assert await store.create_runs([]) == []
    assert await store.list_runs() == []


async def test_sqlite_batch_is_one_transaction(sqlite_url: str) -> None:
    """A batch whose last row cannot be stored leaves no run of it behind."""
    store = open_store(sqlite_url)
    assert store is not None
    await store.open()
    try:
        bad = _run("bad")
        bad.inputs = None  # type: ignore[assignment]  # NOT NULL column: refused
        with pytest.raises(StoreError):
            await store.create_runs([_run("a"), _run("b"), bad])
        assert await store.get_runs(["a", "b", "bad"]) == []
        # The same with an existing id in the batch (the slower path).
        await store.create_runs([_run("a")])
        with pytest.raises(StoreError):
            await store.create_runs([_run("a"), _run("b"), bad])
        assert [r.id for r in await store.get_runs(["a", "b", "bad"])] == ["a"]
    finally:
        await store.close()


async def test_awkward_values_round_trip_exactly(store: Store) -> None:
    """Quotes, braces, backslashes, commas and non-ASCII text, empty strings
    and absent fields come back as given (PostgreSQL sends the batch as
    binary arrays; nothing may be re-quoted or lost on the way)."""
    text = '{"q": "a\\"b,{}\\\\ ☃ NULL"}'
    given = RunRecord(
        'awk{1},"x"',
        'p "odd", {name}',
        text,
        code_version="",
        queue="q,{}",
        priority=-7,
        wake_at=1234.5,
        trace=None,
        created_at=99.25,
    )
    plain = RunRecord("plain", "p", "{}", priority=2**31 - 1)
    assert await store.create_runs([given, plain]) == []
    got = await store.get_run(given.id)
    assert got is not None
    assert (got.policy, got.inputs, got.code_version, got.queue, got.priority) == (
        given.policy,
        text,
        "",
        "q,{}",
        -7,
    )
    assert (got.wake_at, got.trace, got.created_at, got.parent_id) == (1234.5, None, 99.25, None)
    other = await store.get_run("plain")
    assert other is not None and other.priority == 2**31 - 1


async def test_a_batch_whose_columns_vary_run_to_run_round_trips_exactly(store: Store) -> None:
    """Each column constant in some batches and varying in others, NULL in
    some rows and set in others, with ids that exist beside new ones: every
    stored run is exactly the record given (PostgreSQL sends a column that
    is the same in every row once, and only the varying ones as arrays)."""
    old = RunRecord("old", "p", '{"args":[0],"kwargs":{}}', queue="q", created_at=1.0)
    assert await store.create_runs([old]) == []  # a batch of one: nothing varies
    given = [
        RunRecord(
            f"r{i}",
            "p" if i % 2 else "other",
            f'{{"args":[{i}],"kwargs":{{}}}}',
            created_at=100.0 + i,
            updated_at=100.0 + i,
            code_version="v1",
            wake_at=None if i % 3 else 50.5 + i,
            queue="q" if i < 3 else "z",
            priority=i % 2,
            trace=None if i % 2 else f'{{"traceparent":"{i}"}}',
        )
        for i in range(6)
    ]
    moved = RunRecord("old", "p", '{"args":[1],"kwargs":{}}', queue="elsewhere")
    existed = await store.create_runs([given[0], moved, *given[1:]])
    assert existed == [old]  # kept as it was, and handed back as stored
    stored = {r.id: r for r in await store.get_runs([r.id for r in given] + ["old"])}
    assert stored == {**{r.id: r for r in given}, "old": old}
    # ...and a batch where every column is the same but the id.
    same = [RunRecord(f"s{i}", "p", "{}", created_at=7.0, updated_at=7.0) for i in range(3)]
    assert await store.create_runs(same) == []
    assert sorted(await store.get_runs(["s0", "s1", "s2"]), key=lambda r: r.id) == same
