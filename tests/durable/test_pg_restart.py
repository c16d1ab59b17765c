"""A PostgreSQL restart in the middle of a batch loses nothing.

Two worker processes drain a queue; the server is restarted (all connections
dropped) while runs are in flight. Every run must still finish with one
result, each step recorded once, and no step recorded before the restart may
run again.
"""

from __future__ import annotations

import asyncio
import collections
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import stalwart as sw

from .test_workers import _enqueue, _snapshot, _worker


def _restart_postgres() -> None:
    versions = sorted(Path("/etc/postgresql").iterdir()) if Path("/etc/postgresql").exists() else []
    if not versions or shutil.which("pg_ctlcluster") is None:
        pytest.skip("no local PostgreSQL cluster to restart")
    subprocess.run(
        [
            "pg_ctlcluster",
            "--skip-systemctl-redirect",
            versions[-1].name,
            "main",
            "restart",
            "--",
            "-m",
            "fast",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_postgres_restart_mid_batch_loses_nothing(store_url: str, tmp_path: Path) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("a PostgreSQL-only scenario")
    n = 30
    counter = tmp_path / "count.txt"
    asyncio.run(_enqueue(store_url, n))
    workers = [_worker(store_url, counter, "m0", 5.0) for _ in range(2)]
    try:
        deadline = time.monotonic() + 90
        while not counter.exists() or len(counter.read_text().split()) < 10:
            assert time.monotonic() < deadline, "no progress before the restart"
            time.sleep(0.01)
        _restart_postgres()
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
        async with sw.Runner(store_url, recover=False) as client:
            return [await sw.RunHandle(client, f"job-{i}").result(timeout=5) for i in range(n)]

    assert asyncio.run(results()) == [11 * i for i in range(n)]
    executions = collections.Counter(counter.read_text().split())
    for step in recorded_at_restart:
        assert executions[step] == 1, step
    _, recorded = asyncio.run(_snapshot(store_url, n))
    assert len(recorded) == 2 * n
