"""Store mechanisms pinned because a mutation pass found them unguarded.

Each test fails when the mechanism it names is removed from
``stalwart.stores.sqlite`` or ``stalwart.stores.postgres`` (docs/mutation.md
says how the pass is run). Both stores, real files and a real server.

* S8: a heartbeat extends its owner's lease, so nobody can claim the run.
* S8: a write for a run that is gone is refused as stale, never taken for
  a store fault that a retry would fix.
* S10: a run's outcome is recorded once; a second finish is refused.
* S14: a step write while PostgreSQL is down is StoreUnavailable (retry
  later), never another error that would fail the run for good.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.records import OTHER_HOST, claimed_run, step_record

from stalwart.core.errors import StaleLeaseError, StoreUnavailable
from stalwart.stores import open_store
from stalwart.stores.base import Store

# Owners on another host: never judged dead here, only their leases count.
A = OTHER_HOST  # the owner claimed_run claims for
B = "elsewhere:2:b"


async def test_a_heartbeat_extends_the_lease_it_renews(store: Store) -> None:
    await claimed_run(store, "r", lease=-1.0)  # a lease that has run out already
    beat = await store.heartbeat(A, 60.0, ["r"])
    assert beat.lost == [] and beat.cancel == []
    assert await store.claim("r", B, 60.0) is None  # renewed: not B's to take


async def test_a_run_whose_lease_ran_out_can_be_taken_over(store: Store) -> None:
    """The other side of the test above: without the beat, B may take it."""
    first = await claimed_run(store, "r", lease=-1.0)
    taken = await store.claim("r", B, 60.0)
    assert taken is not None and taken.fence > first


async def test_a_step_for_a_run_that_is_gone_is_refused_as_stale(store: Store) -> None:
    step = step_record("1", started_at=0.0)
    with pytest.raises(StaleLeaseError):
        await store.record_step("never-created", 1, step)


async def test_a_finished_run_cannot_be_finished_again(store: Store) -> None:
    fence = await claimed_run(store, "f", lease=60.0)
    await store.finish_run("f", fence, "succeeded", "1", None)
    with pytest.raises(StaleLeaseError, match="succeeded"):
        await store.finish_run("f", fence, "failed", None, '{"type":"E","message":"m"}')
    rec = await store.get_run("f")
    assert rec is not None and (rec.status, rec.result) == ("succeeded", "1")


async def test_a_step_write_while_postgres_is_down_is_unavailable(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("the step connection is PostgreSQL's")
    from psycopg import errors as pg_errors

    s = open_store(f"{store_url}&retry_for=0.3")
    assert s is not None
    await s.open()
    try:
        fence = await claimed_run(s, "d", lease=60.0)

        async def down(*_: Any, **__: Any) -> Any:
            raise pg_errors.CannotConnectNow("the database system is starting up")

        monkeypatch.setattr(s, "_step_connection", down)
        step = step_record("1", started_at=0.0)
        with pytest.raises(StoreUnavailable):
            await s.record_step("d", fence, step)
    finally:
        monkeypatch.undo()
        await s.close()
