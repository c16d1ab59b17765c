"""What a store's readers get of a run's steps: whole, plain records.

A step may be stored compact (its list argument recorded as a reference to
an earlier step's plus the new items, ``core/stepargs.py``). Readers
(``load_steps``, ``load_step``, ``steps_by_key``, ``step_page``) get every record as a plain
``StepRecord`` with its arguments whole, rebuilt when the store reads them;
a record that cannot be rebuilt is a ``CorruptedRecord`` raised by the read
itself, naming the run and the step, never later from an attribute. Only
``load_stored_steps`` (the engine's replay) returns the stored form.
"""

from __future__ import annotations

import json

import pytest
from tests.records import claimed_run

import stalwart as sw
from stalwart.core.ledger import StepRecord, StoredStep
from stalwart.core.stepargs import ext_node, step_hash
from stalwart.stores.base import Store

ITEMS = [json.dumps("first " * 40), json.dumps("second " * 40)]
WHOLE_1 = '{"history":[' + ",".join(ITEMS) + "]}"
WHOLE_2 = '{"history":[' + ",".join([*ITEMS, '"third"']) + "]}"
COMPACT_2 = '{"history":' + ext_node("1", 2, ['"third"']) + "}"


@pytest.fixture
def store(any_store: Store) -> Store:
    """Every store kind, the memory store included (tests/conftest.py)."""
    return any_store


def _step(key: str, whole: str, stored: str, at: float) -> StoredStep:
    return StoredStep(key, "chat", step_hash(whole), stored, '"ok"', None, 1, at, at)


async def test_readers_get_plain_records_with_whole_arguments(store: Store) -> None:
    fence = await claimed_run(store, "r")
    await store.record_step("r", fence, _step("1", WHOLE_1, WHOLE_1, 1.0))
    await store.record_step("r", fence, _step("2", WHOLE_2, COMPACT_2, 2.0))

    steps = await store.load_steps("r")
    assert [type(s) for s in steps.values()] == [StepRecord, StepRecord]
    assert [s.args for s in steps.values()] == [WHOLE_1, WHOLE_2]
    one = await store.load_step("r", "2")
    assert type(one) is StepRecord and one.args == WHOLE_2
    assert await store.load_step("r", "3") is None

    page = await store.step_page("r", 10)
    assert [(type(s), s.args) for s in page.steps] == [(StepRecord, WHOLE_1), (StepRecord, WHOLE_2)]
    # A page that holds the new step alone has it whole too.
    page = await store.step_page("r", 1)
    assert [s.args for s in page.steps] == [WHOLE_2] and page.earlier == 1
    # A reader holding step 1 reads only what is new, whole.
    found = await store.steps_by_key("r", ["2"], {"1": steps["1"]})
    assert [(type(s), s.args) for s in found.values()] == [(StepRecord, WHOLE_2)]
    # ... and whole even when it holds none of what the new step refers to.
    found = await store.steps_by_key("r", ["2"])
    assert [s.args for s in found.values()] == [WHOLE_2]

    # The stored form is unchanged: the engine replays it compact.
    stored = await store.load_stored_steps("r")
    assert [type(s) for s in stored.values()] == [StoredStep, StoredStep]
    assert stored["2"].args == COMPACT_2


async def test_an_unreadable_record_is_refused_by_the_read_naming_run_and_step(
    store: Store,
) -> None:
    fence = await claimed_run(store, "bad")
    await store.record_step("bad", fence, _step("1", WHOLE_1, WHOLE_1, 1.0))
    # Extends a step the run lacks.
    dangling = '{"history":' + ext_node("9", 2, ['"third"']) + "}"
    await store.record_step("bad", fence, _step("2", WHOLE_2, dangling, 2.0))

    for read in (
        store.load_steps("bad"),
        store.load_step("bad", "2"),
        store.steps_by_key("bad", ["2"]),
        store.step_page("bad", 1),
    ):
        with pytest.raises(sw.CorruptedRecord, match=r"run 'bad', step 2\b.*step '9'"):
            await read
    # The stored form still reads: a record is refused where it is made whole.
    assert (await store.load_stored_steps("bad"))["2"].args == dangling
