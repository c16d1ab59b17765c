"""Failing over to a synchronous streaming standby loses nothing and pays nothing twice.

Two PostgreSQL servers of the test's own (:func:`._pg_cluster.pg_replicated`):
a primary and a standby made from it with ``pg_basebackup -R``, replicating
synchronously (``synchronous_standby_names`` names it, ``synchronous_commit
= on``: a commit returns once the standby has flushed it). Worker processes
on the primary drain a queue of durable runs; one is killed with SIGKILL
mid-run; then the standby is promoted (``pg_ctl promote``) and the primary
stopped, mid-batch. The surviving workers were given both servers in one
URL (``target_session_attrs=read-write``), so they reconnect to the new
primary by themselves; a replacement worker is pointed at it alone.

What a user relies on: every run finishes with one result, each step is
recorded once, and every step the standby had when it was promoted (all
the primary had acknowledged) executed exactly once: nothing replicated is
lost or paid for twice. Only a step in flight (on the killed worker, or
at the failover) may execute again.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import stalwart as sw

from ._pg_cluster import PrivateCluster, pg_replicated  # noqa: F401
from .test_workers import _enqueue, _snapshot, _worker

pytestmark = pytest.mark.slow

#: Seconds a step takes: the batch must still be under way at the failover.
PAUSE = 0.25


def _progress(counter: Path) -> int:
    return len(counter.read_text().split()) if counter.exists() else 0


def _until_progress(counter: Path, executions: int, deadline: float) -> None:
    while _progress(counter) < executions:
        assert time.monotonic() < deadline, f"the workers made no progress: {_progress(counter)}"
        time.sleep(0.01)


def test_failover_to_a_synchronous_standby_loses_and_repeats_nothing_replicated(
    pg_replicated: tuple[PrivateCluster, PrivateCluster],  # noqa: F811
    tmp_path: Path,
) -> None:
    primary, standby = pg_replicated
    schema = f"schema=t_{uuid.uuid4().hex[:12]}"
    on_primary = f"{primary.url}?{schema}"
    on_standby = f"{standby.url}?{schema}"
    # Both servers, the writable one first: how a worker finds the new primary.
    either = (
        f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
        f"?target_session_attrs=read-write&{schema}"
    )
    n = 64
    counter = tmp_path / "count.txt"
    asyncio.run(_enqueue(on_primary, n))
    workers = [_worker(either, counter, host, 2.0, PAUSE) for host in ("m0", "m1", "m2")]
    replacement: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 120
        _until_progress(counter, 10, deadline)
        workers[0].send_signal(signal.SIGKILL)  # mid-run: its runs wait out its lease
        workers[0].wait(timeout=10)
        _until_progress(counter, 24, deadline)

        _, acknowledged = asyncio.run(_snapshot(on_primary, n))
        standby.promote()  # the primary's commits now wait for a standby that is gone
        _, replicated = asyncio.run(_snapshot(on_standby, n))
        primary.stop("fast")  # its waiting sessions end; the workers reconnect
        assert acknowledged <= replicated  # everything the primary acknowledged
        assert len(replicated) < 2 * n, "the failover came after the last step"

        replacement = _worker(on_standby, counter, "m3", 2.0, PAUSE)
        while True:
            runs, _ = asyncio.run(_snapshot(on_standby, n))
            if len(runs) == n and all(status == "succeeded" for status in runs.values()):
                break
            assert time.monotonic() < deadline, f"unfinished after the failover: {runs}"
            time.sleep(0.1)
    finally:
        live = [w for w in (*workers[1:], replacement) if w is not None]
        for w in live:
            w.send_signal(signal.SIGTERM)
        for w in live:
            w.wait(timeout=30)
    for w in live:
        assert w.returncode == 0, w.stderr.read() if w.stderr else ""

    async def results() -> list[int]:
        async with sw.Runner(on_standby, serving=False) as client:
            return [await sw.RunHandle(client, f"job-{i}").result(timeout=5) for i in range(n)]

    assert asyncio.run(results()) == [11 * i for i in range(n)]
    executions = collections.Counter(counter.read_text().split())
    for step in replicated:
        assert executions[step] == 1, step  # recorded before the failover: never again
    _, recorded = asyncio.run(_snapshot(on_standby, n))
    assert len(recorded) == 2 * n  # each step recorded once
    assert set(executions) == recorded
