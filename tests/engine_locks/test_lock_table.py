"""The lock table of an execution: reentry, cycles, and tables kept apart."""

from __future__ import annotations

import asyncio

from stalwart.core.engine.locks import LockTable


async def test_a_lock_is_reentered_only_inside_its_own_tables_holder() -> None:
    parent, child = LockTable(), LockTable()
    assert not parent.reentered("lock:a")
    async with parent.hold("lock:a"):
        assert parent.reentered("lock:a")
        # A child run's lock of the same name is its own: taken, not refused.
        assert not child.reentered("lock:a")
        async with child.hold("lock:a"):
            assert child.reentered("lock:a")
    assert not parent.reentered("lock:a")


async def test_crossed_locks_are_a_cycle_named_in_order() -> None:
    table = LockTable()
    a_held, b_held = asyncio.Event(), asyncio.Event()
    seen: list[list[str] | None] = []

    async def x() -> None:
        async with table.hold("lock:a"):
            a_held.set()
            await b_held.wait()
            async with table.hold("lock:b"):  # waits: b is held by y
                pass

    async def y() -> None:
        async with table.hold("lock:b"):
            b_held.set()
            await a_held.wait()
            for _ in range(5):
                await asyncio.sleep(0)  # x is now waiting for b
            seen.append(table.cycle("lock:a"))

    async with asyncio.TaskGroup() as tg:
        tg.create_task(x())
        tg.create_task(y())
    assert seen == [["lock:a", "lock:b"]]
    assert table.cycle("lock:a") is None  # nothing held, nothing waits
