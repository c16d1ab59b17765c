"""Runs of ``Runner()`` in memory: what a user relies on from the memory
paths. Each test names the clause or promise it pins.
"""

from __future__ import annotations

import asyncio

import pytest

import stalwart as sw
from stalwart.core.errors import InputMismatchError


class Ticket:
    """An argument that is not JSON: in memory, inputs need not be (README)."""

    def __init__(self, seat: int) -> None:
        self.seat = seat


@sw.policy
async def book(ticket: Ticket) -> int:
    return ticket.seat


@sw.policy
async def book_json(seat: int) -> int:
    return seat


async def test_memory_run_id_with_other_inputs_is_refused() -> None:
    """S13 "one run id means one run", and the README's idempotency key:
    starting an existing id with other inputs is refused (as it is for JSON
    inputs). With non-JSON inputs in memory it silently returns the *other*
    call's result: booking seat 2 answers "seat 1"."""
    async with sw.Runner() as runner:
        assert await runner.run(book_json, 1, run_id="j") == 1
        with pytest.raises(InputMismatchError):
            await runner.run(book_json, 2, run_id="j")  # the JSON case: refused

        assert await runner.run(book, Ticket(1), run_id="t") == 1
        try:
            got = await runner.run(book, Ticket(2), run_id="t")
        except InputMismatchError:
            return
        pytest.fail(
            f"run id 't' was started with Ticket(1) and again with Ticket(2); the second "
            f"call was answered with the first call's result ({got!r}) instead of being refused"
        )


async def test_memory_run_can_be_cancelled_by_the_id_it_sees() -> None:
    """S9 and the one-path promise: a run of ``Runner()`` can be
    cancelled by its id (``ctx.run_id``, what a policy shows a UI). Through
    ``start()`` it can; through ``run()`` the fast path keeps it out of the
    store and the table, so ``cancel`` says it does not exist and
    ``runner.executing`` does not list it."""
    seen: asyncio.Queue[str] = asyncio.Queue()

    @sw.policy
    async def long_job(ctx: sw.Context) -> str:
        seen.put_nowait(ctx.run_id)
        await asyncio.sleep(30)
        return "finished"

    async with sw.Runner() as runner:
        task = asyncio.ensure_future(runner.run(long_job))
        run_id = await asyncio.wait_for(seen.get(), 5)
        try:
            assert run_id in runner.executing, (
                f"run {run_id!r} is executing in this runner (inside runner.run) but "
                f"runner.executing lists {runner.executing}"
            )
            await runner.cancel(run_id)
            with pytest.raises(sw.CancelledRun):
                await asyncio.wait_for(task, 5)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_memory_children_of_a_run_have_their_parent_in_the_store() -> None:
    """One path in memory: ``list_runs`` shows a run's child runs
    with ``parent_id`` set; the parent itself must be listed too, or an
    inspector (``stalwart ui``) shows orphans whose parent cannot be opened."""

    @sw.policy
    async def double(i: int) -> int:
        return 2 * i

    @sw.policy
    async def fan_out(ctx: sw.Context) -> list[int]:
        return list(await ctx.map(double, [1, 2]))

    async with sw.Runner() as runner:
        assert await runner.run(fan_out) == [2, 4]
        runs = await runner.list_runs()
        ids = {r.id for r in runs}
        orphans = [r.id for r in runs if r.parent_id is not None and r.parent_id not in ids]
        assert not orphans, (
            f"child runs {orphans} name a parent that is not in the store "
            f"(listed: {sorted(ids)}); runner.get_run(parent) raises RunNotFound"
        )
