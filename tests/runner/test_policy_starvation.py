"""A worker's runs never starve behind runs it cannot run: a worker given
only policy B takes its B run while a hundred older, higher-priority runs of
policy A (which no worker here has) wait, through real Runners on a real
SQLite file and real PostgreSQL. (In memory a runner executes what it starts
and never claims from a queue; the memory store's filter is tested in
test_store_policy_filter.py.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

import stalwart as sw

BACKLOG = 100


@sw.policy
async def a(x: int) -> int:
    return x


@sw.policy
async def b(x: int) -> int:
    return x + 1


GATE: dict[str, asyncio.Event] = {}


@sw.policy
async def busy(tag: str) -> str:
    """Holds its worker's only slot until the test opens its gate."""
    await GATE.setdefault(tag, asyncio.Event()).wait()
    return tag


async def _backlog(url: str) -> None:
    """A's runs, first in line, enqueued by a process that serves nothing."""
    async with sw.Runner(url) as producer:
        await producer.enqueue_many([sw.RunCall(a, i) for i in range(BACKLOG)], priority=5)


async def test_a_worker_serving_only_b_takes_its_run_behind_a_backlog_of_a(store_url: str) -> None:
    await _backlog(store_url)
    async with sw.Runner(
        store_url, policies=[b], serving=True, concurrency=1, poll_interval=0.05
    ) as worker:
        handle = await worker.enqueue(b, 1, run_id="mine")
        async with asyncio.timeout(30):  # a bound on a hang, not a measurement
            assert await handle.result() == 2
        waiting = await worker.list_runs(status="pending", limit=BACKLOG + 1)
    assert len(waiting) == BACKLOG and {r.policy for r in waiting} == {"a"}


async def test_a_policy_registered_after_start_is_served(store_url: str) -> None:
    await _backlog(store_url)
    async with sw.Runner(store_url, serving=True, concurrency=1, poll_interval=0.05) as worker:
        await asyncio.sleep(0.1)  # the loop has made passes with no policy at all
        worker.register(b)
        async with sw.Runner(store_url) as producer:
            await producer.enqueue(b, 1, run_id="late")
        async with asyncio.timeout(30):
            assert await worker.outcome("late") == 2


async def test_runs_of_a_policy_no_worker_has_are_still_reported(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The store no longer shows such runs to the worker at all; the
    warning that names the missing policy is still given."""
    await _backlog(store_url)
    with caplog.at_level(logging.WARNING, logger="stalwart.runner"):
        async with sw.Runner(store_url, policies=[b], serving=True, poll_interval=0.05) as worker:
            handle = await worker.enqueue(b, 1)
            async with asyncio.timeout(30):
                assert await handle.result() == 2
                while "needs policy 'a'" not in caplog.text:
                    await asyncio.sleep(0.02)
    said = [r for r in caplog.records if "needs policy 'a'" in r.getMessage()]
    assert len(said) == 1  # once per name, not once per pass


async def test_a_worker_with_room_for_one_run_still_names_a_missing_policy(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The look for missing policies runs while the worker has room; room
    for a single run is room."""
    await _backlog(store_url)
    with caplog.at_level(logging.WARNING, logger="stalwart.runner"):
        async with sw.Runner(
            store_url, policies=[b], serving=True, concurrency=1, poll_interval=0.05
        ):
            async with asyncio.timeout(30):
                while "needs policy 'a'" not in caplog.text:
                    await asyncio.sleep(0.02)


async def test_a_worker_with_no_room_left_does_not_look_for_missing_policies(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The look costs a read of the newest pending runs: a worker whose
    slots are all taken pays nothing, and looks once one frees up."""
    GATE.clear()
    await _backlog(store_url)
    async with sw.Runner(store_url) as producer:
        await producer.enqueue(busy, "slot", run_id="busy")
    with caplog.at_level(logging.WARNING, logger="stalwart.runner"):
        async with sw.Runner(
            store_url, policies=[busy], serving=True, concurrency=1, poll_interval=0.02
        ) as worker:
            async with asyncio.timeout(30):
                while (await worker.get_run("busy")).status != "running":
                    await asyncio.sleep(0.02)
                for _ in range(10):  # a few passes of its loop, with no room
                    await asyncio.sleep(0.02)
                assert "needs policy 'a'" not in caplog.text
                GATE.setdefault("slot", asyncio.Event()).set()
                assert await worker.outcome("busy") == "slot"
                while "needs policy 'a'" not in caplog.text:  # room again: it looks
                    await asyncio.sleep(0.02)


async def test_a_runner_that_does_not_serve_says_nothing_of_runs_it_would_never_take(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client (a web app that starts runs, a script) claims only what it
    starts: the pending runs of policies it lacks are not its business, and
    it must not warn about them on every start."""
    await _backlog(store_url)
    with caplog.at_level(logging.WARNING, logger="stalwart.runner"):
        async with sw.Runner(store_url, policies=[b], poll_interval=0.02) as client:
            assert await client.run(b, 1) == 2
            for _ in range(10):  # a few passes of its loop
                await asyncio.sleep(0.02)
    assert "needs policy 'a'" not in caplog.text
