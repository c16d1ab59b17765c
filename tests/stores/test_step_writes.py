"""Step records written side by side: first write wins (S3), a stale writer
is refused (S8), and neither decides for its neighbours.

Records that arrive while a write is in flight share the next one (a batch
on PostgreSQL, a transaction on SQLite). Both stores, a real SQLite file and
the real PostgreSQL server.
"""

from __future__ import annotations

import asyncio

import pytest
from tests.records import claimed_run, step_record

from stalwart.core.errors import StaleLeaseError
from stalwart.core.ledger import StepRecord
from stalwart.stores.base import Store

B = "elsewhere:2:b"


def _step(key: str, output: str) -> StepRecord:
    return step_record(key, output)


async def test_one_key_written_twice_side_by_side_keeps_the_first(store: Store) -> None:
    x = await claimed_run(store, "x")
    y = await claimed_run(store, "y")
    got = await asyncio.gather(
        store.record_step("y", y, _step("0", '"lead"')),  # in flight while the rest queue
        store.record_step("x", x, _step("1", '"first"')),
        store.record_step("x", x, _step("1", '"second"')),
        store.record_step("y", y, _step("1", '"y"')),
    )
    assert [r.output for r in got] == ['"lead"', '"first"', '"first"', '"y"']
    steps = await store.load_steps("x")
    assert {k: s.output for k, s in steps.items()} == {"1": '"first"'}
    assert {k: s.output for k, s in (await store.load_steps("y")).items()} == {
        "0": '"lead"',
        "1": '"y"',
    }
    got = await asyncio.gather(  # the same, the key twice and nothing else queued
        store.record_step("y", y, _step("2", '"lead"')),
        store.record_step("x", x, _step("3", '"first"')),
        store.record_step("x", x, _step("3", '"second"')),
    )
    assert [r.output for r in got] == ['"lead"', '"first"', '"first"']
    assert (await store.load_steps("x"))["3"].output == '"first"'


async def test_a_stale_record_side_by_side_with_good_ones_fails_alone(store: Store) -> None:
    old = await claimed_run(store, "taken", lease=-1.0)  # its lease has run out
    new = await store.claim("taken", B, 60.0)
    assert new is not None and new.fence > old
    x = await claimed_run(store, "x")
    got = await asyncio.gather(
        store.record_step("x", x, _step("0", '"lead"')),
        store.record_step("x", x, _step("1", '"x"')),
        store.record_step("taken", old, _step("1", '"stale"')),
        store.record_step("x", x, _step("2", '"x2"')),
        return_exceptions=True,
    )
    assert [getattr(r, "output", None) for r in got] == ['"lead"', '"x"', None, '"x2"']
    refused = got[2]
    assert isinstance(refused, StaleLeaseError), refused
    assert "taken" in str(refused) and "step 1" in str(refused)
    assert f"fencing token {old} is stale" in str(refused)
    assert sorted(await store.load_steps("x")) == ["0", "1", "2"]
    assert await store.load_steps("taken") == {}


async def test_a_stale_writer_is_told_who_holds_the_run_now(store: Store, store_url: str) -> None:
    """What a replaced worker reads (and logs) when its step is refused: the
    run, the step, its stale fencing token and the run's state now."""
    old = await claimed_run(store, "r", lease=-1.0)
    new = await store.claim("r", B, 60.0)
    assert new is not None
    with pytest.raises(StaleLeaseError) as taken:
        await store.record_step("r", old, _step("1", "1"))
    await store.finish_run("r", new.fence, "succeeded", "1", None)
    with pytest.raises(StaleLeaseError) as ended:
        await store.record_step("r", new.fence, _step("1", "1"))
    with pytest.raises(StaleLeaseError) as gone:
        await store.record_step("never", 1, _step("1", "1"))
    if store_url.startswith("sqlite"):
        now_taken, now_ended, now_gone = (
            f"(now fence {new.fence}, running)",
            f"(now fence {new.fence}, succeeded)",
            "(now gone)",
        )
        stale = f"fencing token {old} is stale "
        prefix = "step 1 refused, "
    else:
        now_taken = f"(now {new.fence}); another worker has taken the run over"
        now_ended, now_gone = "the run is succeeded, no longer running", "no longer in the store"
        stale, prefix = f"fencing token {old} is stale ", "step 1 refused: "
    assert str(taken.value) == f"run 'r': {prefix}{stale}{now_taken}"
    assert str(ended.value).startswith("run 'r': ") and str(ended.value).endswith(now_ended)
    assert str(gone.value).startswith("run 'never': ") and str(gone.value).endswith(now_gone)
