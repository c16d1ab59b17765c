"""The workloads, each a function of its size returning measurements.

Each workload times only itself (``time.perf_counter`` around the work, set-up
excluded) and returns a dict with at least ``seconds``; the runner repeats it
and reports medians. Sizes default to BENCHMARKS.md's; the smoke test passes
tiny ones so the code never rots.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stalwart as sw

Result = dict[str, Any]


# -- B1: sequential calls in memory --------------------------------------------
@sw.policy
async def _noop(i: int) -> int:
    return i


@sw.policy
async def _b1_loop(ctx: sw.Context, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await ctx.call(_noop, i)
    return time.perf_counter() - start


def b1_stalwart(n: int = 10_000) -> Result:
    seconds = sw.Runner().run_sync(_b1_loop, n=n)
    return {"seconds": seconds, "per_call_us": seconds / n * 1e6}


async def _bare(i: int) -> int:
    return i


def b1_floor(n: int = 10_000) -> Result:
    async def loop() -> float:
        start = time.perf_counter()
        for i in range(n):
            await _bare(i)
        return time.perf_counter() - start

    seconds = asyncio.run(loop())
    return {"seconds": seconds, "per_call_us": seconds / n * 1e6}


# -- B2: sequential durable steps on SQLite ------------------------------------
@sw.policy
async def _b2_loop(ctx: sw.Context, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await ctx.call(_noop, i)
    return time.perf_counter() - start


def _sqlite_url(tmp: str, name: str, query: str = "") -> str:
    return f"sqlite:///{Path(tmp) / name}{query}"


def b2_stalwart(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        url = _sqlite_url(tmp, "b2.db")
        seconds = sw.Runner(url).run_sync(_b2_loop, n=n)
        size = os.path.getsize(Path(tmp) / "b2.db") + _wal_size(Path(tmp) / "b2.db")
    return {"seconds": seconds, "steps_per_s": n / seconds, "bytes_per_step": size / n}


def _wal_size(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def b2_floor(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "raw.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
        start = time.perf_counter()
        for i in range(n):
            db.execute("BEGIN")
            db.execute("INSERT INTO t VALUES (?, ?)", (str(i), str(i)))
            db.execute("COMMIT")
        seconds = time.perf_counter() - start
        db.close()
    return {"seconds": seconds, "steps_per_s": n / seconds}


# -- B4: fan-out of durable steps with simulated I/O ---------------------------
@sw.policy
async def _io_step(i: int) -> int:
    await asyncio.sleep(0.01)
    return i


@sw.policy
async def _b4_fanout(ctx: sw.Context, n: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(ctx.call(_io_step, i) for i in range(n)))
    return time.perf_counter() - start


def b4_stalwart_sqlite(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        seconds = sw.Runner(_sqlite_url(tmp, "b4.db")).run_sync(_b4_fanout, n=n)
    return {"seconds": seconds}


def b4_floor(n: int = 1_000) -> Result:
    async def io(i: int) -> int:
        await asyncio.sleep(0.01)
        return i

    async def fan() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(io(i) for i in range(n)))
        return time.perf_counter() - start

    return {"seconds": asyncio.run(fan())}


# -- B5: kill -9 mid-run, then recover ----------------------------------------
_B5_APP = Path(__file__).with_name("b5_app.py")


def b5_stalwart_sqlite(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        url = _sqlite_url(tmp, "b5.db")
        counter = Path(tmp) / "count"
        child = subprocess.Popen(
            [sys.executable, str(_B5_APP), url, str(counter), "run", str(n)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        target = n // 2
        for line in child.stdout:
            if line.startswith("done") and int(line.split()[1]) >= target:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, str(_B5_APP), url, str(counter), "recover", str(n)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        total = time.perf_counter() - start
        inner = float(out.split("recovered_in ")[1].split()[0])
        import_s = float(out.split("startup ")[1].split()[0])
        runs = counter.read_text().split()
        re_executed = len(runs) - len(set(runs))
    return {
        "seconds": inner,
        "restart_to_done_s": total,
        "startup_s": import_s,
        "re_executed": re_executed,
    }


# -- B7: many suspended runs ------------------------------------------------------
@sw.policy
async def _b7_wait(ctx: sw.Context, i: int) -> int:
    got = await ctx.wait_for("go")
    return int(got) + i


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def b7_stalwart_sqlite(n: int = 100_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        url = _sqlite_url(tmp, "b7.db", "?durability=group")

        async def main() -> Result:
            async with sw.Runner(url, policies=[_b7_wait], poll_interval=0.05) as runner:
                rss0 = _rss_mb()
                start = time.perf_counter()
                for i in range(n):
                    await runner.start(_b7_wait, i=i, run_id=f"r{i}")
                await asyncio.sleep(0.2)
                while len(await runner.list_runs("running", limit=1)):
                    await asyncio.sleep(0.05)
                suspend_s = time.perf_counter() - start
                live = len(runner._live)
                import gc

                gc.collect()
                rss1 = _rss_mb()
                t = time.perf_counter()
                await runner.signal(f"r{n // 2}", "go", 1)
                result = await sw.RunHandle(runner, f"r{n // 2}").result(timeout=30)
                resume_s = time.perf_counter() - t
                assert result == 1 + n // 2
            return {
                "seconds": suspend_s,
                "live_runs_held": live,
                "rss_growth_mb": rss1 - rss0,
                "resume_one_s": resume_s,
            }

        return asyncio.run(main())


# -- B8: import time ---------------------------------------------------------------
def b8_stalwart(n: int = 5) -> Result:
    times = []
    for _ in range(n):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                "import time; t = time.perf_counter(); import stalwart; "
                "print(time.perf_counter() - t)",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        times.append(float(out))
    times.sort()
    return {"seconds": times[len(times) // 2]}


WORKLOADS: dict[str, dict[str, Callable[..., Result]]] = {
    "B1": {"stalwart": b1_stalwart, "floor: bare await": b1_floor},
    "B2": {"stalwart sqlite": b2_stalwart, "floor: raw sqlite3 commit": b2_floor},
    "B4": {"stalwart sqlite": b4_stalwart_sqlite, "floor: asyncio.gather": b4_floor},
    "B5": {"stalwart sqlite": b5_stalwart_sqlite},
    "B7": {"stalwart sqlite": b7_stalwart_sqlite},
    "B8": {"stalwart": b8_stalwart},
}

SMOKE_SIZES = {"B1": 50, "B2": 20, "B4": 20, "B5": 40, "B7": 20, "B8": 1}
