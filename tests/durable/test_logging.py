"""What a runner says through ``logging``: one record per moment of a run's
life an operator asks about, each with its facts as record attributes
(``event``, ``run_id``, ``policy``, ``status``...) for a JSON formatter."""

from __future__ import annotations

import asyncio
import logging

import pytest

import stalwart as sw
from stalwart.core.ledger import RunRecord
from stalwart.stores import open_store
from stalwart.stores.base import this_host


@sw.policy
async def greet(name: str) -> str:
    return f"hello {name}"


@sw.policy
async def waits(ctx: sw.Context) -> str:
    return f"got {await ctx.wait_for('go')}"


def events(caplog: pytest.LogCaptureFixture, run_id: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "run_id", None) == run_id]


async def test_a_run_logs_started_claimed_and_finished(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="stalwart")
    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(greet, "ada", run_id="r1") == "hello ada"
    got = events(caplog, "r1")
    assert [r.event for r in got] == ["run.started", "run.claimed", "run.finished"]  # type: ignore[attr-defined]
    assert all(r.name == "stalwart.runner" and r.levelno == logging.INFO for r in got)
    assert all(r.policy == "greet" for r in got)  # type: ignore[attr-defined]
    finished = got[-1]
    assert finished.status == "succeeded" and finished.seconds >= 0  # type: ignore[attr-defined]
    assert "r1" in finished.getMessage() and "succeeded" in finished.getMessage()


async def test_suspension_and_resumption_are_logged(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="stalwart")
    async with sw.Runner(sqlite_url, poll_interval=0.05) as runner:
        handle = await runner.start(waits, run_id="w1")
        while (await runner.get_run("w1")).status != "suspended":
            await asyncio.sleep(0.01)
        await runner.signal("w1", "go", 1)
        assert await handle.result() == "got 1"
    seen = [r.event for r in events(caplog, "w1")]  # type: ignore[attr-defined]
    assert seen == [
        "run.started",
        "run.claimed",
        "run.suspended",
        "run.resumed",
        "run.finished",
    ]
    resumed = next(r for r in events(caplog, "w1") if r.event == "run.resumed")  # type: ignore[attr-defined]
    assert resumed.fence == 2  # type: ignore[attr-defined]


async def test_a_run_taken_from_a_dead_holder_is_logged_as_recovered(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = sqlite_url
    dead = f"{this_host()}:999999999:deadbeef"  # no such process: a holder that died
    store = open_store(url)
    await store.open()
    await store.create_run(RunRecord("d1", "greet", '{"args": ["bob"], "kwargs": {}}'))
    assert await store.claim("d1", dead, 60.0) is not None
    await store.close()
    caplog.set_level(logging.INFO, logger="stalwart")
    async with sw.Runner(url, policies=[greet]) as runner:
        await runner.recover()
        assert await runner.outcome("d1") == "hello bob"
    recovered = [r for r in events(caplog, "d1") if r.event == "run.recovered"]  # type: ignore[attr-defined]
    assert len(recovered) == 1 and recovered[0].previous_owner == dead  # type: ignore[attr-defined]


async def test_a_retry_is_a_warning_naming_run_step_and_error(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    tries: list[int] = []

    @sw.policy(retries=3, backoff=0)
    async def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionError("blip")
        return "ok"

    @sw.policy
    async def root(ctx: sw.Context) -> str:
        return await ctx.call(flaky)

    caplog.set_level(logging.INFO, logger="stalwart")
    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(root, run_id="f1") == "ok"
    retries = [r for r in events(caplog, "f1") if r.event == "step.retry"]  # type: ignore[attr-defined]
    assert [r.attempt for r in retries] == [2, 3]  # type: ignore[attr-defined]
    assert all(r.levelno == logging.WARNING and r.name == "stalwart.engine" for r in retries)
    assert all(r.step == "1" and r.error_type == "ConnectionError" for r in retries)  # type: ignore[attr-defined]
    assert "blip" in retries[0].getMessage()


async def test_a_store_that_goes_down_is_a_warning_once(
    sqlite_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="stalwart")
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:

        async def down(*args: object, **kwargs: object) -> None:
            raise sw.StoreUnavailable("disk on fire")

        monkeypatch.setattr(runner.store, "next_wake", down)
        await asyncio.sleep(0.3)  # many polls
        monkeypatch.undo()
        await asyncio.sleep(0.1)
    seen = [r.event for r in caplog.records if hasattr(r, "event")]  # type: ignore[attr-defined]
    assert seen.count("store.unavailable") == 1
    assert seen.count("store.available") == 1
