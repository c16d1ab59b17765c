"""SQLite: a write that fails fails alone, as the error its caller can act on.

Step records of several runs share the open transaction (group commit, S6).
A write that fails beside them -- refused by the store's own rules, a value
SQLite cannot bind, a full file, a commit SQLite interrupts -- must neither
drop nor fail the records beside it, and its caller sees a StoreError
(permanent) or StoreUnavailable (retry later) that says what went wrong:
never a TypeError or an OverflowError from inside the store.

Real files. ``max_page_count`` fills the file for real, and a progress
handler makes SQLite interrupt statements (SQLITE_INTERRUPT rolls an
explicit transaction back, as a failing disk would).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.records import claimed_run, step_record
from tests.stores.conftest import committed_keys, interrupt

from stalwart.core.errors import RunNotFound, StoreError, StoreUnavailable
from stalwart.core.ledger import RunRecord
from stalwart.stores.sqlite import SQLiteStore


@pytest.fixture
def store(sqlite_store: SQLiteStore) -> Iterator[SQLiteStore]:
    """``durability=commit``: a step returns once its record is committed. A
    progress handler the test left is cleared before the store closes."""
    yield sqlite_store
    sqlite_store.db.set_progress_handler(None, 1)


async def test_a_refused_write_keeps_the_acknowledged_steps_beside_it(
    grouped: SQLiteStore, tmp_path: Path
) -> None:
    """x's step is acknowledged, not yet committed; a signal to a run that
    does not exist is refused in the same transaction. The refusal is the
    caller's (RunNotFound, naming the run); x's step is committed."""
    x = await claimed_run(grouped, "x")
    await grouped.record_step("x", x, step_record("1"))
    with pytest.raises(RunNotFound, match="no run 'nobody'"):
        await grouped.send_signal("nobody", "go", "1")
    assert committed_keys(tmp_path / "ledger.db", "x") == ["1"]
    await grouped.record_step("x", x, step_record("2"))
    await grouped.finish_run("x", x, "succeeded", "3", None)
    assert sorted(await grouped.load_steps("x")) == ["1", "2"]


@pytest.mark.parametrize("beside", [False, True], ids=["alone", "beside-a-step"])
async def test_a_value_sqlite_cannot_store_is_a_store_error(
    grouped: SQLiteStore, tmp_path: Path, beside: bool
) -> None:
    """A priority past SQLite's 64-bit integers: a StoreError naming the
    value's problem, whether the write is alone or shares the transaction
    with an acknowledged step, which is kept."""
    x = await claimed_run(grouped, "x")
    if beside:
        await grouped.record_step("x", x, step_record("1"))
    with pytest.raises(StoreError, match="cannot store a value") as caught:
        await grouped.create_run(RunRecord("big", "p", "{}", priority=2**70))
    assert type(caught.value) is StoreError
    assert isinstance(caught.value.__cause__, OverflowError)
    assert await grouped.get_run("big") is None
    assert committed_keys(tmp_path / "ledger.db", "x") == (["1"] if beside else [])
    fence = await claimed_run(grouped, "after")  # the store writes on
    await grouped.record_step("after", fence, step_record("1"))


async def test_a_full_file_fails_the_write_that_filled_it_not_the_steps_beside_it(
    grouped: SQLiteStore, tmp_path: Path
) -> None:
    """A run too large for the file, created while x's acknowledged step
    waits for its commit: SQLite rolls the whole transaction back; the
    caller gets StoreUnavailable (a full disk may clear), x's step is
    written again and committed."""
    x = await claimed_run(grouped, "x")
    await grouped.record_step("x", x, step_record("1"))
    (pages,) = grouped.db.execute("PRAGMA page_count").fetchone()
    grouped.db.execute(f"PRAGMA max_page_count = {pages + 20}")
    with pytest.raises(StoreUnavailable, match="cannot write: database or disk is full"):
        await grouped.create_run(RunRecord("huge", "p", "x" * 1_000_000))
    grouped.db.execute("PRAGMA max_page_count = 1073741823")
    assert committed_keys(tmp_path / "ledger.db", "x") == ["1"]
    assert await grouped.get_run("huge") is None
    await grouped.record_step("x", x, step_record("2"))
    assert sorted(await grouped.load_steps("x")) == ["1", "2"]


def _interrupt_the_statement_after(db: sqlite3.Connection, statement: str) -> None:
    """Make SQLite interrupt the statement after the first one on ``db``
    that starts with ``statement``, once."""
    armed = [False]

    def on_statement(sql: str) -> None:
        if sql.startswith(statement) and not armed[0]:
            armed[0] = True
            db.set_progress_handler(interrupt(1), 1)  # from the next statement on

    db.set_trace_callback(on_statement)


async def test_a_step_whose_commit_is_interrupted_is_written_again(
    store: SQLiteStore, tmp_path: Path
) -> None:
    """x's step waits for its commit, which SQLite interrupts (and rolls
    back). The store writes the record again: x's step returns recorded."""
    x = await claimed_run(store, "x")
    _interrupt_the_statement_after(store.db, "INSERT INTO steps")
    got = await store.record_step("x", x, step_record("1", '"one"'))
    store.db.set_trace_callback(None)
    assert got.output == '"one"'
    assert committed_keys(tmp_path / "ledger.db", "x") == ["1"]


async def test_a_step_whose_batch_cannot_be_written_again_fails_and_its_run_replays(
    store: SQLiteStore,
) -> None:
    """x's step waits for its commit; from then on every statement fails (a
    dying disk): the commit, and the store's attempt to write the record
    again. x's step fails with a StoreError saying both; once the store
    answers again, x's execution is refused (StoreUnavailable, replay)
    rather than write past the record it lost."""
    x = await claimed_run(store, "x")
    armed = [False]

    def on_statement(sql: str) -> None:
        if sql.startswith("INSERT INTO steps") and not armed[0]:
            armed[0] = True
            store.db.set_progress_handler(interrupt(None), 1)

    store.db.set_trace_callback(on_statement)
    with pytest.raises(StoreError) as caught:
        await store.record_step("x", x, step_record("1"))
    store.db.set_trace_callback(None)
    store.db.set_progress_handler(None, 1)
    assert str(caught.value).endswith(
        "commit failed: interrupted; writing the batch beside it again failed: interrupted"
    )
    assert await store.load_steps("x") == {}
    with pytest.raises(StoreUnavailable, match="resumes by replay") as refused:
        await store.record_step("x", x, step_record("2"))
    assert "run 'x': step 2 refused: earlier records of this execution" in str(refused.value)
    assert str(refused.value).endswith("could not be written again; the run resumes by replay")
    y = await claimed_run(store, "y")  # the store itself writes on
    await store.record_step("y", y, step_record("1"))
    await store.record_step("y", y, step_record("2"))
    assert sorted(await store.load_steps("y")) == ["1", "2"]


async def test_a_write_sqlite_interrupts_with_nothing_beside_it_fails_whole(
    store: SQLiteStore,
) -> None:
    """A run created while no transaction is open; SQLite interrupts its
    insert (and rolls the transaction back itself). The caller hears a
    StoreError saying the write failed and why; nothing of it is kept, and
    the store writes on."""
    _interrupt_the_statement_after(store.db, "BEGIN IMMEDIATE")
    with pytest.raises(StoreError) as caught:
        await store.create_run(RunRecord("new", "p", "{}"))
    store.db.set_trace_callback(None)
    assert type(caught.value) is StoreError
    assert str(caught.value) == f"SQLite store {store.path!r}: cannot write: interrupted"
    assert await store.get_run("new") is None
    x = await claimed_run(store, "x")
    await store.record_step("x", x, step_record("1"))
    assert list(await store.load_steps("x")) == ["1"]


async def test_a_write_whose_commit_is_interrupted_fails_and_keeps_the_steps_beside_it(
    grouped: SQLiteStore, tmp_path: Path
) -> None:
    """A run created while x's acknowledged step shares its transaction; the
    commit is interrupted. The creator hears a StoreError saying so; x's step is
    written again, so it is committed, and the run created is not."""
    x = await claimed_run(grouped, "x")
    await grouped.record_step("x", x, step_record("1"))
    _interrupt_the_statement_after(grouped.db, "RELEASE stalwart_write")
    with pytest.raises(StoreError, match="commit failed: interrupted"):
        await grouped.create_run(RunRecord("new", "p", "{}"))
    grouped.db.set_trace_callback(None)
    assert committed_keys(tmp_path / "ledger.db", "x") == ["1"]
    assert await grouped.get_run("new") is None


async def test_a_rewrite_interrupted_at_its_insert_fails_the_waiting_step(
    store: SQLiteStore,
) -> None:
    """The commit of x's step is interrupted, and so is the insert of the
    store's second attempt (after its BEGIN): x's step fails with a
    StoreError saying both, nothing of it is kept, and the store writes on."""
    x = await claimed_run(store, "x")
    script = ["INSERT INTO steps", "BEGIN IMMEDIATE"]  # then: the COMMIT, the insert again

    def on_statement(sql: str) -> None:
        if script and sql.startswith(script[0]):
            script.pop(0)
            store.db.set_progress_handler(interrupt(1), 1)  # the next statement

    store.db.set_trace_callback(on_statement)
    with pytest.raises(StoreError) as caught:
        await store.record_step("x", x, step_record("1"))
    store.db.set_trace_callback(None)
    assert type(caught.value) is StoreError
    assert str(caught.value).endswith(
        "commit failed: interrupted; writing the batch beside it again failed: interrupted"
    )
    assert await store.load_steps("x") == {}
    y = await claimed_run(store, "y")
    await store.record_step("y", y, step_record("1"))
    assert list(await store.load_steps("y")) == ["1"]


async def test_a_write_that_cannot_open_its_savepoint_fails_and_keeps_the_steps_beside_it(
    grouped: SQLiteStore, tmp_path: Path
) -> None:
    """x's acknowledged step is in the open transaction; the next write's
    savepoint is interrupted (SQLite rolls the transaction back). The
    writer hears a StoreError saying so; x's step is written again."""
    x = await claimed_run(grouped, "x")
    _interrupt_the_statement_after(grouped.db, "INSERT INTO steps")
    await grouped.record_step("x", x, step_record("1"))
    with pytest.raises(StoreError) as caught:
        await grouped.create_run(RunRecord("new", "p", "{}"))
    grouped.db.set_trace_callback(None)
    assert str(caught.value) == f"SQLite store {grouped.path!r}: cannot write: interrupted"
    assert committed_keys(tmp_path / "ledger.db", "x") == ["1"]
    assert await grouped.get_run("new") is None
