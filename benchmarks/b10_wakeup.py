"""B10: how soon another process's enqueue or signal gets a run going.

A worker process serves (default settings: ``poll_interval`` 0.5 s); this
process, a producer, enqueues a run and reads back when its first step
began (``enqueue -> first step``), and signals a run waiting for a signal
and reads back when it resumed (``signal -> resume``). Both times are
``time.time()`` in the two processes of one machine. Each sample follows a
pause of :data:`GAP` seconds (a user clicking "approve", not a loop); the
"cold" samples follow :data:`COLD_IDLE` seconds with nothing happening (on
SQLite the wake-up poll has backed off by then). Reported: p50 and p99 in
milliseconds. DBOS ``send``/``recv`` and ``enqueue`` are the peer
(:mod:`benchmarks.b10_dbos`).

``python -m benchmarks.b10_wakeup worker URL`` is the worker process.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import stalwart as sw

from ._util import ROOT, Result, pg_schema, pg_url_with, require, require_postgres

#: Seconds between two samples.
GAP = 0.1
#: Seconds of quiet before each cold sample, and how many there are.
COLD_IDLE = 3.0
COLD = 3


@sw.policy
async def b10_first(ctx: sw.Context) -> float:
    """Its first step is the clock: when the run began executing."""
    return await ctx.now()


@sw.policy
async def b10_wait(ctx: sw.Context) -> float:
    """Waits for "go"; returns when it resumed."""
    await ctx.wait_for("go")
    return await ctx.now()


POLICIES = [b10_first, b10_wait]


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(1, round(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(name: str, seconds: list[float]) -> Result:
    ms = [s * 1000 for s in seconds]
    return {f"{name}_p50_ms": statistics.median(ms), f"{name}_p99_ms": percentile(ms, 99)}


def spawn(cmd: list[str]) -> subprocess.Popen[str]:
    """A worker process, once it says it serves."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "serving":
        proc.kill()
        raise RuntimeError(f"the worker did not start: {line!r}")
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _samples(n: int, one: Callable[[], Awaitable[float]], gap: float) -> list[float]:
    out = []
    for _ in range(n):
        await asyncio.sleep(gap)
        out.append(await one())
    return out


async def _measure(url: str, n: int, cold: int) -> Result:
    async with sw.Runner(url, policies=POLICIES) as client:

        async def enqueued() -> float:
            sent = time.time()
            began = await (await client.enqueue(b10_first)).result()
            return float(began) - sent

        async def signalled() -> float:
            handle = await client.enqueue(b10_wait)
            while (await client.get_run(handle.run_id)).status != "suspended":
                await asyncio.sleep(0.005)
            await asyncio.sleep(GAP)
            sent = time.time()
            await client.signal(handle.run_id, "go")
            return float(await handle.result()) - sent

        await enqueued()  # warm both processes up
        await signalled()
        out = summary("enqueue", await _samples(n, enqueued, GAP))
        out |= summary("signal", await _samples(n, signalled, 0.0))
        if cold:
            out["cold_enqueue_ms"] = 1000 * statistics.median(
                await _samples(cold, enqueued, COLD_IDLE)
            )
    return out


def _stalwart(url: str, n: int, cold: int) -> Result:
    proc = spawn([sys.executable, "-m", "benchmarks.b10_wakeup", "worker", url])
    try:
        start = time.perf_counter()
        out = asyncio.run(_measure(url, n, cold))
        out["seconds"] = time.perf_counter() - start
        return out
    finally:
        stop(proc)


def b10_stalwart_postgres(n: int = 50) -> Result:
    require_postgres()
    with pg_schema("b10") as schema:
        return _stalwart(pg_url_with(schema=schema), n, COLD if n >= 20 else 0)


def b10_stalwart_sqlite(n: int = 50) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _stalwart(f"sqlite:///{Path(tmp) / 'b10.db'}", n, COLD if n >= 20 else 0)


def b10_dbos_postgres(n: int = 50) -> Result:
    require("dbos")
    from . import b10_dbos

    return b10_dbos.on_postgres(n)


def b10_dbos_sqlite(n: int = 50) -> Result:
    require("dbos")
    from . import b10_dbos

    return b10_dbos.on_sqlite(n)


async def _worker(url: str) -> None:
    runner = sw.Runner(url, policies=POLICIES)
    serving = asyncio.create_task(runner.serve())
    await asyncio.sleep(0.3)  # its loop runs, and listens
    print("serving", flush=True)
    await serving


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        asyncio.run(_worker(sys.argv[2]))
