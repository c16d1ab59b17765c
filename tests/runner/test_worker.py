"""The worker loop: what it outlives (the store) and what it must not hide (its own bugs).

A store that refuses a pass (a bad row: a ``StoreError``) is logged and the
loop tries again; an outage is waited out (tests/durable/test_pins.py). Any
other exception is a bug in the loop or in what it calls: it must end the
loop and reach the user (``serve()`` returns and raises it, an awaiting
caller is told, closing the runner raises it) instead of being logged while
runs never start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.errors import CorruptedRecord, StalwartError
from stalwart.runner import observe, worker

BOUND = 20.0  # a hang fails the test


@sw.policy
async def double(n: int) -> int:
    return 2 * n


def _break_claims(runner: sw.Runner, exc: BaseException, times: int | None) -> list[int]:
    """Make the runner's store raise ``exc`` from claim_due ``times`` times
    (None: always); returns the list that counts the calls."""
    store: Any = runner.store
    real = store.claim_due
    calls: list[int] = []

    async def claim_due(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if times is None or len(calls) <= times:
            raise exc
        return await real(*args, **kwargs)

    store.claim_due = claim_due
    return calls


async def test_a_bug_in_the_claim_path_ends_serve_with_it(store_url: str) -> None:
    runner = sw.Runner(store_url, policies=[double], poll_interval=0.05)
    await runner.enqueue(double, 1, run_id="never")
    _break_claims(runner, TypeError("'NoneType' object is not subscriptable"), None)
    with pytest.raises(TypeError, match="not subscriptable"):
        async with asyncio.timeout(BOUND):
            await runner.serve(asyncio.Event())
    assert runner.closed  # serve closed the runner on its way out
    async with sw.Runner(store_url) as reader:
        assert (await reader.get_run("never")).status == "pending"  # nothing lost


async def test_a_bug_in_the_claim_path_reaches_an_awaiting_caller_and_close(
    store_url: str,
) -> None:
    runner = sw.Runner(store_url, policies=[double], poll_interval=0.05, serving=True)
    await runner.open()
    _break_claims(runner, TypeError("a bug"), None)
    handle = await runner.enqueue(double, 2, run_id="stuck")
    with pytest.raises(StalwartError) as caught:
        async with asyncio.timeout(BOUND):
            await handle.result()
    text = str(caught.value)
    assert "'stuck'" in text and "worker loop stopped on a bug" in text
    assert "TypeError: a bug" in text
    assert isinstance(caught.value.__cause__, TypeError)
    with pytest.raises(TypeError, match="a bug"):
        await runner.close()
    assert runner.closed


async def test_a_store_refusing_a_pass_is_logged_and_tried_again(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with sw.Runner(store_url, policies=[double], poll_interval=0.05, serving=True) as runner:
        calls = _break_claims(runner, CorruptedRecord("run 'x': a bad row"), 2)
        with caplog.at_level(logging.ERROR):
            handle = await runner.enqueue(double, 21, run_id="later")
            async with asyncio.timeout(BOUND):
                assert await handle.result() == 42
    assert len(calls) > 2  # refused twice, then claimed
    refused = [r for r in caplog.records if "refused the worker loop's pass" in r.getMessage()]
    assert refused and "a bad row" in refused[0].getMessage()
    assert refused[0].getMessage().startswith("the store refused the worker loop's pass (")
    # What a log pipeline reads: an error, under its event name.
    assert refused[0].levelno == logging.ERROR
    assert getattr(refused[0], "event", None) == "store.refused"


async def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with sw.Runner(store_url, policies=[double], poll_interval=0.02, serving=True) as runner:
        with caplog.at_level(logging.INFO, logger="stalwart"):
            first = await runner.enqueue(double, 1, run_id="before")
            async with asyncio.timeout(BOUND):
                assert await first.result() == 2  # a healthy store: neither is logged
            calls = _break_claims(runner, sw.StoreUnavailable("the disk is away"), 4)
            handle = await runner.enqueue(double, 21, run_id="after")
            async with asyncio.timeout(BOUND):
                assert await handle.result() == 42
                while "the store answers again" not in caplog.text:
                    await asyncio.sleep(0.02)
            for _ in range(5):  # a few more passes on a store that answers
                await asyncio.sleep(0.02)
    assert len(calls) > 4
    # What a log pipeline reads: the event name beside each message.
    said = [(getattr(r, "event", None), r.getMessage()) for r in caplog.records]
    down = [(e, m) for e, m in said if m.startswith("the store is unavailable")]
    back = [(e, m) for e, m in said if m == "the store answers again"]
    assert len(down) == 1 and "the disk is away" in down[0][1]
    assert down[0][0] == "store.unavailable"
    assert back == [("store.available", "the store answers again")]
    assert said.index(down[0]) < said.index(back[0])


def _slow_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "store.slow"]


async def test_a_pass_the_store_answers_quickly_draws_no_slow_warning(
    store_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(observe, "SLOW_STORE", BOUND)  # no pass here takes that long
    with caplog.at_level(logging.WARNING, logger="stalwart"):
        async with sw.Runner(
            store_url, policies=[double], poll_interval=0.02, serving=True
        ) as runner:
            async with asyncio.timeout(BOUND):
                assert await runner.run(double, 4) == 8
            for _ in range(5):  # a few more passes of the loop
                await asyncio.sleep(0.02)
    assert _slow_warnings(caplog) == []


async def test_a_slow_pass_is_warned_with_what_was_slow_and_how_long(
    store_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store slow enough to shorten leases is named in the log, with the
    part of the loop's pass that waited on it and for how long."""
    monkeypatch.setattr(observe, "SLOW_STORE", 0.01)
    async with sw.Runner(store_url, policies=[double], poll_interval=0.02, serving=True) as runner:
        store: Any = runner.store
        real = store.claim_due

        async def claim_due(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0.05)  # every pass waits on this store
            return await real(*args, **kwargs)

        store.claim_due = claim_due
        with caplog.at_level(logging.WARNING, logger="stalwart"):
            async with asyncio.timeout(BOUND):
                while not _slow_warnings(caplog):
                    await asyncio.sleep(0.02)
    warned = _slow_warnings(caplog)[0]
    assert warned.levelno == logging.WARNING
    assert warned.getMessage().startswith("the store is slow: heartbeat and claims took ")
    seconds = warned.__dict__["seconds"]  # a field of the record, for a log pipeline
    assert 0.04 <= seconds < BOUND  # the pass's own time, not a clock reading


async def test_a_flood_of_wake_ups_costs_at_most_one_pass_per_pause(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However often the loop is woken (a producer's burst, or anyone who can
    notify the store's channels), a pass that claimed nothing is followed by
    a pause before the next: the flood never spins it."""
    pause = 0.05
    monkeypatch.setattr(worker, "QUIET", pause)
    async with sw.Runner(store_url, policies=[double], poll_interval=1.0, serving=True) as runner:
        store: Any = runner.store
        real = store.next_wake
        passes: list[float] = []

        async def next_wake() -> Any:
            passes.append(time.monotonic())  # once per pass of the loop
            return await real()

        store.next_wake = next_wake

        async def flood() -> None:
            while True:
                runner._table.wake_worker()
                await asyncio.sleep(0)

        flooding = asyncio.create_task(flood())
        began = time.monotonic()
        await asyncio.sleep(0.5)
        flooding.cancel()
        elapsed = time.monotonic() - began
    during = [t for t in passes if began <= t <= began + elapsed]
    assert len(during) <= elapsed / pause + 2
