"""Several worker processes share one store; one dies with SIGKILL mid-run.

What a user relies on: every run finishes with exactly one result, and a
step recorded before the kill never runs again; only steps in flight on the
dead worker may run twice. Workers on other "machines" (simulated with
STALWART_HOSTNAME) take over once the dead worker's lease expires.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.crash import spawn

import stalwart as sw

APP = Path(__file__).with_name("worker_app.py")
sys.path.insert(0, str(APP.parent))
import worker_app  # noqa: E402


def _worker(
    url: str, counter: Path, host: str, lease: float, pause: float = 0.03
) -> subprocess.Popen[str]:
    env = {"STALWART_HOSTNAME": host, "LEASE": str(lease), "STEP_PAUSE": str(pause)}
    proc = spawn(APP, url, counter, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "serving"
    return proc


async def _enqueue(url: str, n: int) -> None:
    async with sw.Runner(url, serving=False) as client:
        for i in range(n):
            await client.enqueue(worker_app.job, i, run_id=f"job-{i}")


async def _snapshot(url: str, n: int) -> tuple[dict[str, str], set[str]]:
    async with sw.Runner(url, serving=False) as client:
        runs = {r.id: r.status for r in await client.list_runs(limit=n + 10)}
        recorded: set[str] = set()
        for run_id in runs:
            for s in await client.steps(run_id):
                recorded.add(f"{'a' if s.name == 'step_a' else 'b'}:{run_id.split('-')[1]}")
        return runs, recorded


@pytest.mark.parametrize("hosts", ["one-machine", "three-machines"])
def test_workers_drain_a_queue_despite_a_kill(store_url: str, tmp_path: Path, hosts: str) -> None:
    n = 24
    counter = tmp_path / "count.txt"
    asyncio.run(_enqueue(store_url, n))
    names = ["m0", "m0", "m0"] if hosts == "one-machine" else ["m0", "m1", "m2"]
    lease = 1.0
    workers = [_worker(store_url, counter, h, lease) for h in names]
    try:
        deadline = time.monotonic() + 30
        while counter.exists() is False or len(counter.read_text().split()) < 8:
            assert time.monotonic() < deadline, "workers made no progress"
            time.sleep(0.01)
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(timeout=10)
        _, recorded_at_kill = asyncio.run(_snapshot(store_url, n))
        while True:
            runs, _ = asyncio.run(_snapshot(store_url, n))
            if all(status == "succeeded" for status in runs.values()) and len(runs) == n:
                break
            assert time.monotonic() < deadline, f"unfinished: {runs}"
            time.sleep(0.1)
    finally:
        for w in workers[1:]:
            w.send_signal(signal.SIGTERM)
        for w in workers[1:]:
            w.wait(timeout=20)
    for w in workers[1:]:
        assert w.returncode == 0, w.stderr.read() if w.stderr else ""

    async def results() -> list[int]:
        async with sw.Runner(store_url, serving=False) as client:
            return [await sw.RunHandle(client, f"job-{i}").result(timeout=5) for i in range(n)]

    assert asyncio.run(results()) == [i + 10 * i for i in range(n)]
    runs_count = collections.Counter(counter.read_text().split())
    for step in recorded_at_kill:
        assert runs_count[step] == 1, step  # finished before the kill: never again
    extra = sum(runs_count.values()) - 2 * n
    assert 0 <= extra <= 4  # at most what the dead worker had in flight (concurrency 4)
    _, recorded = asyncio.run(_snapshot(store_url, n))
    assert len(recorded) == 2 * n  # each step recorded once


def test_cancel_reaches_a_run_held_by_another_worker(store_url: str, tmp_path: Path) -> None:
    counter = tmp_path / "count.txt"
    worker = _worker(store_url, counter, "m0", 1.5)  # heartbeat every 0.5 s
    try:

        async def go() -> float:
            async with sw.Runner(store_url, serving=False) as client:
                handle = await client.enqueue(worker_app.slow_job, run_id="long")
                deadline = time.monotonic() + 20
                while not counter.exists():
                    assert time.monotonic() < deadline, "the worker never started the run"
                    await asyncio.sleep(0.02)
                assert (await client.get_run("long")).status == "running"
                asked = time.monotonic()
                await client.cancel("long")
                with pytest.raises(sw.CancelledRun):
                    await handle.result(timeout=10)
                assert (await client.get_run("long")).status == "cancelled"
                return time.monotonic() - asked

        assert asyncio.run(go()) < 10
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=20)
    assert worker.returncode == 0


def test_a_worker_paused_past_its_lease_stops_once_it_sees_the_takeover(
    store_url: str, tmp_path: Path
) -> None:
    """S8: SIGSTOP a worker mid-run until another takes the run over; after
    SIGCONT it may finish the step it was in, but executes no other."""
    counter = tmp_path / "count.txt"
    n = 80

    async def enqueue() -> None:
        async with sw.Runner(store_url, serving=False) as client:
            await client.enqueue(worker_app.long_job, n, run_id="long")

    def ticks() -> list[tuple[int, int]]:
        lines = counter.read_text().split() if counter.exists() else []
        return [(int(i), int(pid)) for _, i, pid in (line.split(":") for line in lines)]

    def wait_for(check: Any, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, what
            time.sleep(0.02)

    asyncio.run(enqueue())
    stale = _worker(store_url, counter, "m0", 1.0)
    fresh = None
    try:
        wait_for(lambda: len(ticks()) >= 5, "the first worker never started")
        stale.send_signal(signal.SIGSTOP)
        fresh = _worker(store_url, counter, "m0", 1.0)
        wait_for(lambda: sum(pid == fresh.pid for _, pid in ticks()) >= 5, "no takeover")
        seen_before_cont = len(ticks())
        stale.send_signal(signal.SIGCONT)

        async def finished() -> Any:
            async with sw.Runner(store_url, serving=False) as client:
                return await sw.RunHandle(client, "long").result(timeout=60)

        assert asyncio.run(finished()) == sum(range(n))
        after = ticks()[seen_before_cont:]
        by_stale = [i for i, pid in after if pid == stale.pid]
        assert len(by_stale) <= 1, f"the replaced worker went on executing steps {by_stale}"
        assert stale.poll() is None  # it stopped that run, not itself
    finally:
        for proc in (stale, fresh):
            if proc is not None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
