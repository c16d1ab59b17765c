"""A PostgreSQL restart in the middle of a batch loses nothing.

Two worker processes drain a queue; the server is restarted (all connections
dropped) while runs are in flight. Every run must still finish with one
result, each step recorded once, and no step recorded before the restart may
run again. The server restarted is a private, throwaway one
(:mod:`._pg_cluster`), never the shared server other tests are using.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import time
import uuid
from pathlib import Path

import stalwart as sw

from ._pg_cluster import PrivateCluster, pg_cluster  # noqa: F401
from .test_workers import _enqueue, _snapshot, _worker


def test_postgres_restart_mid_batch_loses_nothing(
    pg_cluster: PrivateCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    store_url = f"{pg_cluster.url}?schema=t_{uuid.uuid4().hex[:12]}"
    n = 30
    counter = tmp_path / "count.txt"
    asyncio.run(_enqueue(store_url, n))
    workers = [_worker(store_url, counter, "m0", 5.0) for _ in range(2)]
    try:
        deadline = time.monotonic() + 90
        while not counter.exists() or len(counter.read_text().split()) < 10:
            assert time.monotonic() < deadline, "no progress before the restart"
            time.sleep(0.01)
        pg_cluster.restart()
        _, recorded_at_restart = asyncio.run(_snapshot(store_url, n))
        while True:
            runs, _ = asyncio.run(_snapshot(store_url, n))
            if len(runs) == n and all(s == "succeeded" for s in runs.values()):
                break
            assert time.monotonic() < deadline, f"unfinished after the restart: {runs}"
            time.sleep(0.2)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            w.wait(timeout=30)

    async def results() -> list[int]:
        async with sw.Runner(store_url, serving=False) as client:
            return [await sw.RunHandle(client, f"job-{i}").result(timeout=5) for i in range(n)]

    assert asyncio.run(results()) == [11 * i for i in range(n)]
    executions = collections.Counter(counter.read_text().split())
    for step in recorded_at_restart:
        assert executions[step] == 1, step
    _, recorded = asyncio.run(_snapshot(store_url, n))
    assert len(recorded) == 2 * n
