"""Stalwart's workloads and the floors, each a function of its size returning measurements.

Each workload times only itself (``time.perf_counter`` around the work; set-up
such as opening a store or creating a schema is excluded) and returns a dict
with at least ``seconds``; the runner repeats it and reports medians. Sizes
default to the sizes docs/performance.md gives; the smoke test passes tiny ones so the code never
rots. The peers' workloads are in :mod:`benchmarks.peers`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import stalwart as sw

from ._util import (
    PG_URL,
    ROOT,
    Result,
    encrypted_store,
    pg_schema,
    pg_schema_bytes,
    pg_url_with,
    python_startup_s,
    re_executed,
    read_until,
    require,
    require_postgres,
    rss_mb,
    sqlite_bytes,
)


# -- the policies ------------------------------------------------------------------
@sw.policy
async def noop(i: int) -> int:
    return i


@sw.policy
async def sequential(ctx: sw.Context, n: int) -> int:
    """``n`` sequential steps, each a no-op policy call."""
    for i in range(n):
        await ctx.call(noop, i)
    return n


@sw.policy
async def io_step(i: int) -> int:
    await asyncio.sleep(0.01)
    return i


@sw.policy
async def fanout(ctx: sw.Context, n: int) -> int:
    """``n`` concurrent steps, each awaiting 10 ms of simulated I/O."""
    results = await asyncio.gather(*(ctx.call(io_step, i) for i in range(n)))
    return len(results)


FIRST_LIVE: list[float] = []  # when this process executed its first B5 step


@sw.policy
async def counted(i: int, counter: str) -> int:
    if not FIRST_LIVE:
        FIRST_LIVE.append(time.perf_counter())
    with open(counter, "a") as f:
        f.write(f"{i}\n")
    return i


@sw.policy
async def long_run(ctx: sw.Context, n: int, counter: str) -> int:
    """B5's run: ``n`` steps, each noting its index in ``counter`` when it executes."""
    total = 0
    for i in range(n):
        total += await ctx.call(counted, i, counter)
        print(f"done {i}", flush=True)
    return total


@sw.policy
async def small_run(ctx: sw.Context, i: int) -> int:
    """B6's small run: one durable step; its result tells which worker ran it."""
    await ctx.call(noop, i)
    return os.getpid()


@sw.policy
async def waits_for_go(ctx: sw.Context, i: int) -> int:
    got = await ctx.wait_for("go")
    return int(got) + i


def _sqlite_url(tmp: str, name: str, query: str = "") -> str:
    return f"sqlite:///{Path(tmp) / name}{query}"


async def _timed_run(url: str | None, policy: sw.Policy[..., int], n: int) -> tuple[float, int]:
    """Open the runner (not timed), then time one run of ``policy(n=n)``."""
    runner = sw.Runner(url)
    await runner.open()
    try:
        start = time.perf_counter()
        result = await runner.run(policy, n=n)
        seconds = time.perf_counter() - start
    finally:
        await runner.close()
    assert result == n, result
    return seconds, result


# -- B1: sequential calls in memory --------------------------------------------------
def b1_stalwart(n: int = 10_000) -> Result:
    seconds, _ = asyncio.run(_timed_run(None, sequential, n))
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


def _flow_loop(mod: object, n: int, use_async: bool) -> tuple[object, dict[str, int]]:
    """A PocketFlow graph of ``n`` node steps: one node looping on itself, then an end."""
    node_cls = mod.AsyncNode if use_async else mod.Node  # type: ignore[attr-defined]
    flow_cls = mod.AsyncFlow if use_async else mod.Flow  # type: ignore[attr-defined]

    if use_async:

        class Step(node_cls):  # type: ignore[valid-type, misc]
            async def exec_async(self, prep_res: object) -> None:
                return None

            async def post_async(self, shared: dict[str, int], p: object, e: object) -> str:
                shared["i"] += 1
                return "again" if shared["i"] < shared["n"] else "done"

    else:

        class Step(node_cls):  # type: ignore[valid-type, misc, no-redef]
            def exec(self, prep_res: object) -> None:
                return None

            def post(self, shared: dict[str, int], p: object, e: object) -> str:
                shared["i"] += 1
                return "again" if shared["i"] < shared["n"] else "done"

    step = Step()
    end = node_cls()
    step - "again" >> step
    step - "done" >> end
    return flow_cls(start=step), {"i": 0, "n": n}


def flow_b1(module: str, use_async: bool, n: int) -> Result:
    """B1 as a PocketFlow program: ``n`` node steps of a loop (plus one end node)."""
    require(module)
    import importlib

    mod = importlib.import_module(module)
    flow, shared = _flow_loop(mod, n, use_async)
    if use_async:

        async def go() -> float:
            start = time.perf_counter()
            await flow.run_async(shared)  # type: ignore[attr-defined]
            return time.perf_counter() - start

        seconds = asyncio.run(go())
    else:
        start = time.perf_counter()
        flow.run(shared)  # type: ignore[attr-defined]
        seconds = time.perf_counter() - start
    assert shared["i"] == n
    return {"seconds": seconds, "per_call_us": seconds / n * 1e6}


def b1_stalwart_flow(n: int = 10_000) -> Result:
    return flow_b1("stalwart.flow", False, n)


def b1_stalwart_async_flow(n: int = 10_000) -> Result:
    return flow_b1("stalwart.flow", True, n)


# -- B2: sequential durable steps on SQLite ------------------------------------------
def _b2_stalwart(n: int, query: str = "", encrypt: bool = False) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "b2.db"
        url = _sqlite_url(tmp, "b2.db", query)

        async def main() -> tuple[float, int, int]:
            runner = sw.Runner(encrypted_store(url) if encrypt else url)
            await runner.open()
            before = sqlite_bytes(db)
            start = time.perf_counter()
            await runner.run(sequential, n=n)
            seconds = time.perf_counter() - start
            await runner.close()
            return seconds, before, sqlite_bytes(db)

        seconds, before, after = asyncio.run(main())
    return {"seconds": seconds, "steps_per_s": n / seconds, "bytes_per_step": (after - before) / n}


def b2_stalwart(n: int = 1_000) -> Result:
    return _b2_stalwart(n)


def b2_stalwart_encrypted(n: int = 1_000) -> Result:
    """Every value sealed with AES-256-GCM (stalwart.stores.encryption)."""
    return _b2_stalwart(n, encrypt=True)


def b2_stalwart_group(n: int = 1_000) -> Result:
    return _b2_stalwart(n, "?durability=group")


def b2_stalwart_full(n: int = 1_000) -> Result:
    """fsync on every commit, as LangGraph's SqliteSaver and DBOS run SQLite."""
    return _b2_stalwart(n, "?synchronous=FULL")


def b2_floor(n: int = 1_000) -> Result:
    return _b2_floor(n, "NORMAL")


def b2_floor_full(n: int = 1_000) -> Result:
    return _b2_floor(n, "FULL")


def _b2_floor(n: int, synchronous: str) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raw.db"
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
        before = sqlite_bytes(path)
        start = time.perf_counter()
        for i in range(n):
            db.execute("BEGIN")
            db.execute("INSERT INTO t VALUES (?, ?)", (str(i), str(i)))
            db.execute("COMMIT")
        seconds = time.perf_counter() - start
        after = sqlite_bytes(path)
        db.close()
    return {"seconds": seconds, "steps_per_s": n / seconds, "bytes_per_step": (after - before) / n}


# -- B3: sequential durable steps on PostgreSQL --------------------------------------
def b3_stalwart(n: int = 1_000) -> Result:
    return _b3_stalwart(n)


def b3_stalwart_encrypted(n: int = 1_000) -> Result:
    """Every value sealed with AES-256-GCM (stalwart.stores.encryption)."""
    return _b3_stalwart(n, encrypt=True)


def _b3_stalwart(n: int, encrypt: bool = False) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        url = pg_url_with(schema=schema)

        async def main() -> tuple[float, int]:
            runner = sw.Runner(encrypted_store(url) if encrypt else url)
            await runner.open()
            before = pg_schema_bytes(schema)
            start = time.perf_counter()
            await runner.run(sequential, n=n)
            seconds = time.perf_counter() - start
            await runner.close()
            return seconds, before

        seconds, before = asyncio.run(main())
        after = pg_schema_bytes(schema)
    return {"seconds": seconds, "steps_per_s": n / seconds, "bytes_per_step": (after - before) / n}


def _raw_pg(n: int, autocommit: bool) -> Result:
    require_postgres()
    import psycopg

    with pg_schema("raw", create=True) as schema, psycopg.connect(PG_URL) as conn:
        conn.autocommit = True
        conn.execute(f'CREATE TABLE "{schema}".t (k TEXT PRIMARY KEY, v TEXT)')
        before = pg_schema_bytes(schema)
        sql = f'INSERT INTO "{schema}".t VALUES (%s, %s)'
        conn.autocommit = autocommit
        start = time.perf_counter()
        for i in range(n):
            conn.execute(sql, (str(i), str(i)))
            if not autocommit:
                conn.commit()
        seconds = time.perf_counter() - start
        after = pg_schema_bytes(schema)
    return {"seconds": seconds, "steps_per_s": n / seconds, "bytes_per_step": (after - before) / n}


def b3_floor(n: int = 1_000) -> Result:
    """One INSERT per step in autocommit mode: one round trip, one commit."""
    return _raw_pg(n, autocommit=True)


def b3_floor_tx(n: int = 1_000) -> Result:
    """BEGIN; INSERT; COMMIT per step, psycopg's default transaction handling."""
    return _raw_pg(n, autocommit=False)


def b3_floor_async(n: int = 1_000) -> Result:
    """The autocommit INSERT through psycopg's asyncio connection (Stalwart's driver)."""
    require_postgres()
    import psycopg

    with pg_schema("raw", create=True) as schema:

        async def main() -> float:
            conn = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
            async with conn:
                await conn.execute(f'CREATE TABLE "{schema}".t (k TEXT PRIMARY KEY, v TEXT)')
                sql = f'INSERT INTO "{schema}".t VALUES (%s, %s)'
                start = time.perf_counter()
                for i in range(n):
                    await conn.execute(sql, (str(i), str(i)))
                return time.perf_counter() - start

        seconds = asyncio.run(main())
    return {"seconds": seconds, "steps_per_s": n / seconds}


# -- B4: fan-out of durable steps with simulated I/O ---------------------------------
def b4_stalwart_memory(n: int = 1_000) -> Result:
    seconds, _ = asyncio.run(_timed_run(None, fanout, n))
    return {"seconds": seconds}


def b4_stalwart_sqlite(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        seconds, _ = asyncio.run(_timed_run(_sqlite_url(tmp, "b4.db"), fanout, n))
    return {"seconds": seconds}


def b4_stalwart_sqlite_full(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        url = _sqlite_url(tmp, "b4.db", "?synchronous=FULL")
        seconds, _ = asyncio.run(_timed_run(url, fanout, n))
    return {"seconds": seconds}


def b4_stalwart_postgres(n: int = 1_000) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        seconds, _ = asyncio.run(_timed_run(pg_url_with(schema=schema), fanout, n))
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


# -- B5: kill -9 mid-run, then recover ---------------------------------------------
def kill_and_recover(app: list[str], n: int, tmp: str) -> Result:
    """Run ``app ... run N`` until it reports step N/2, SIGKILL it, then time
    ``app ... recover N`` from spawn to exit (and inside, from open to done).

    The app appends each executed step's index to ``tmp/count`` and prints
    ``done I`` after step I; the recovering one prints ``recovered_in S`` and
    ``first_live_in S`` (from open to the first step executed again, that is
    the replay of what was recorded).
    """
    counter = Path(tmp) / "count"
    child = subprocess.Popen(
        [*app, str(counter), "run", str(n)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert child.stdout is not None
    try:
        read_until(child.stdout, "done", n // 2)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    start = time.perf_counter()
    proc = subprocess.run(
        [*app, str(counter), "recover", str(n)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    total = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"recovery exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    out = proc.stdout
    inner = float(out.split("recovered_in ")[1].split()[0])
    resume = float(out.split("first_live_in ")[1].split()[0])
    executed = len(set(counter.read_text().split()))
    assert executed == n, f"{executed} of {n} steps executed"
    startup = python_startup_s()
    return {
        "seconds": inner,
        "resume_s": resume,
        "restart_to_done_s": total,
        "beyond_interpreter_s": total - startup,
        "re_executed": re_executed(counter),
    }


APPS = [sys.executable, "-m", "benchmarks.apps"]


def b5_stalwart_sqlite(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return kill_and_recover([*APPS, "stalwart-b5", _sqlite_url(tmp, "b5.db")], n, tmp)


def b5_stalwart_sqlite_full(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        url = _sqlite_url(tmp, "b5.db", "?synchronous=FULL")
        return kill_and_recover([*APPS, "stalwart-b5", url], n, tmp)


def b5_stalwart_postgres(n: int = 1_000) -> Result:
    require_postgres()
    with pg_schema("sw") as schema, tempfile.TemporaryDirectory() as tmp:
        return kill_and_recover([*APPS, "stalwart-b5", pg_url_with(schema=schema)], n, tmp)


# -- B6: a PostgreSQL queue drained by worker processes -----------------------------
def drain(workers: list[list[str]], n: int, count_done: object, window: object) -> Result:
    """Start worker processes (each prints "ready" once imported), say "go" to
    all at once, wait until ``count_done()`` reaches ``n``, then stop them.

    ``wall_s`` runs from "go" to the last run done (worker start-up such as
    opening connections included); ``runs_per_s`` is ``n`` over the drain
    window from the database's own timestamps (first run started to last run
    finished), which leaves start-up out.
    """
    procs = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        for cmd in workers
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"a worker did not start: {line!r}")
        start = time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        deadline = start + max(120.0, n / 5)
        while count_done() < n:  # type: ignore[operator]
            if time.perf_counter() > deadline:
                raise TimeoutError(f"only {count_done()} of {n} runs done")  # type: ignore[operator]
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a worker exited before the queue was drained")
            time.sleep(0.01)
        wall = time.perf_counter() - start
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    first, last, per_worker = window()  # type: ignore[operator]
    return {
        "seconds": last - first,
        "runs_per_s": n / (last - first),
        "wall_s": wall,
        "wall_runs_per_s": n / wall,
        "busiest_worker_share": max(per_worker) / n,
    }


def _pg_scalar(sql: str) -> float:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
    return float(row[0]) if row and row[0] is not None else 0.0


def b6_stalwart(workers: int, n: int, worker: list[str] | None = None) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        url = pg_url_with(schema=schema)

        async def enqueue() -> float:
            async with sw.Runner(url, serving=False) as client:
                start = time.perf_counter()
                for i in range(n):
                    await client.enqueue(small_run, i, run_id=f"b6-{i}", queue="b6")
                return time.perf_counter() - start

        enqueue_s = asyncio.run(enqueue())
        s = f'"{schema}"'

        def done() -> int:
            return int(_pg_scalar(f"SELECT count(*) FROM {s}.runs WHERE status = 'succeeded'"))

        def window() -> tuple[float, float, list[int]]:
            first = _pg_scalar(f"SELECT min(started_at) FROM {s}.steps")
            last = _pg_scalar(f"SELECT max(updated_at) FROM {s}.runs")
            import psycopg

            with psycopg.connect(PG_URL) as conn:
                rows = conn.execute(f"SELECT count(*) FROM {s}.runs GROUP BY result").fetchall()
            return first, last, [int(r[0]) for r in rows]

        cmd = [*(worker or [*APPS, "stalwart-b6"]), url]
        out = drain([cmd] * workers, n, done, window)
    out["enqueue_per_s"] = n / enqueue_s
    return out


def b6_stalwart_1(n: int = 2_000) -> Result:
    return b6_stalwart(1, n)


def b6_stalwart_2(n: int = 2_000) -> Result:
    return b6_stalwart(2, n)


# -- B7: many suspended runs ---------------------------------------------------------
def _b7(url: str, n: int) -> Result:
    async def main() -> Result:
        async with sw.Runner(url, policies=[waits_for_go], poll_interval=0.05) as runner:
            gc.collect()
            rss0 = rss_mb()
            start = time.perf_counter()
            for i in range(n):
                await runner.start(waits_for_go, i=i, run_id=f"r{i}")
            await asyncio.sleep(0.2)
            while len(await runner.list_runs("running", limit=1)):
                await asyncio.sleep(0.05)
            suspend_s = time.perf_counter() - start
            live = len(runner.executing)
            gc.collect()
            rss1 = rss_mb()
            t = time.perf_counter()
            await runner.signal(f"r{n // 2}", "go", 1)
            result = await sw.RunHandle(runner, f"r{n // 2}").result(timeout=30)
            resume_s = time.perf_counter() - t
            assert result == 1 + n // 2
            steps = await runner.steps(f"r{n // 2}")
        return {
            "seconds": suspend_s,
            "suspended_per_s": n / suspend_s,
            "live_runs_held": live,
            "rss_growth_mb": rss1 - rss0,
            "resume_one_s": resume_s,
            "steps_recorded_after_resume": len(steps),
        }

    return asyncio.run(main())


def b7_stalwart_sqlite(n: int = 100_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b7(_sqlite_url(tmp, "b7.db", "?durability=group"), n)


def b7_stalwart_postgres(n: int = 10_000) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        return _b7(pg_url_with(schema=schema), n)


# -- B11: enqueue, one run at a time and in batches -----------------------------------
BATCH = 1_000  # runs per enqueue_many call, and per COMMIT in the batch floors


def _b11_inputs(i: int) -> str:
    """What a run of ``noop(i)`` records as its inputs: the floors write the same."""
    return f'{{"args":[{i}],"kwargs":{{}}}}'


def _b11_stalwart(url: str, n: int, batch: bool) -> Result:
    from stalwart.runner import RunCall

    async def main() -> float:
        async with sw.Runner(url, serving=False) as client:
            await client.enqueue(noop, -1, run_id="warm", queue="b11")  # schema, pool, caches
            start = time.perf_counter()
            if batch:
                for lo in range(0, n, BATCH):
                    calls = [
                        RunCall(noop, i, run_id=f"b11-{i}") for i in range(lo, min(n, lo + BATCH))
                    ]
                    await client.enqueue_many(calls, queue="b11")
            else:
                for i in range(n):
                    await client.enqueue(noop, i, run_id=f"b11-{i}", queue="b11")
            seconds = time.perf_counter() - start
            assert (await client.store.count_runs(queue="b11"))["pending"]["b11"] == n + 1
            return seconds

    seconds = asyncio.run(main())
    return {"seconds": seconds, "runs_per_s": n / seconds}


def b11_stalwart_sqlite_batch(n: int = 20_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b11_stalwart(_sqlite_url(tmp, "b11.db"), n, batch=True)


def b11_stalwart_postgres_batch(n: int = 20_000) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        return _b11_stalwart(pg_url_with(schema=schema), n, batch=True)


def b11_stalwart_sqlite(n: int = 2_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b11_stalwart(_sqlite_url(tmp, "b11.db"), n, batch=False)


def b11_stalwart_postgres(n: int = 2_000) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        return _b11_stalwart(pg_url_with(schema=schema), n, batch=False)


def _b11_sqlite_floor(n: int, per_commit: int) -> Result:
    """Raw sqlite3 in WAL with synchronous=NORMAL (Stalwart's default): the
    run's id and inputs into a two-column table, ``per_commit`` rows a COMMIT."""
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "raw.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
        start = time.perf_counter()
        for lo in range(0, n, per_commit):
            rows = [(f"b11-{i}", _b11_inputs(i)) for i in range(lo, min(n, lo + per_commit))]
            db.execute("BEGIN")
            db.executemany("INSERT INTO t VALUES (?, ?)", rows)
            db.execute("COMMIT")
        seconds = time.perf_counter() - start
        db.close()
    return {"seconds": seconds, "runs_per_s": n / seconds}


def b11_floor_sqlite_batch(n: int = 20_000) -> Result:
    return _b11_sqlite_floor(n, BATCH)


def b11_floor_sqlite(n: int = 2_000) -> Result:
    return _b11_sqlite_floor(n, 1)


def b11_floor_sqlite_runs(n: int = 2_000) -> Result:
    """A run a COMMIT into the table Stalwart keeps runs in, its indexes and
    all (the queue's listings and claims need them): what a queue row costs
    before any framework code runs."""
    from stalwart.stores.base import RUN_COLUMNS
    from stalwart.stores.sqlite.schema import migrate

    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "raw.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        migrate(db, "raw.db")
        marks = ",".join("?" * len(RUN_COLUMNS.split(",")))
        sql = f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({marks})"
        start = time.perf_counter()
        for i in range(n):
            now = time.time()
            row = (f"b11-{i}", "noop", _b11_inputs(i), "pending", None, None, now, now, "v")
            db.execute("BEGIN")
            rest = (None,) * 4 + (0, 0, "b11", 0, None, None, None)
            db.execute(sql, row + rest + (None,) * (len(RUN_COLUMNS.split(",")) - 20))
            db.execute("COMMIT")
        seconds = time.perf_counter() - start
        db.close()
    return {"seconds": seconds, "runs_per_s": n / seconds}


def _b11_pg_floor(n: int, per_commit: int) -> Result:
    """Raw psycopg: ``executemany`` INSERT (pipelined), one COMMIT per
    ``per_commit`` rows; with 1, BEGIN; INSERT; COMMIT a run."""
    require_postgres()
    import psycopg

    with pg_schema("raw", create=True) as schema, psycopg.connect(PG_URL) as conn:
        conn.autocommit = True
        conn.execute(f'CREATE TABLE "{schema}".t (k TEXT PRIMARY KEY, v TEXT)')
        conn.autocommit = False
        sql = f'INSERT INTO "{schema}".t VALUES (%s, %s)'
        start = time.perf_counter()
        with conn.cursor() as cur:
            for lo in range(0, n, per_commit):
                rows = [(f"b11-{i}", _b11_inputs(i)) for i in range(lo, min(n, lo + per_commit))]
                if per_commit == 1:
                    cur.execute(sql, rows[0])
                else:
                    cur.executemany(sql, rows)
                conn.commit()
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "runs_per_s": n / seconds}


def b11_floor_postgres_batch(n: int = 20_000) -> Result:
    return _b11_pg_floor(n, BATCH)


def b11_floor_postgres(n: int = 2_000) -> Result:
    return _b11_pg_floor(n, 1)


# -- B8: import time -------------------------------------------------------------------
def import_b8(module: str, n: int) -> Result:
    require(module)
    from ._util import import_time_s

    return {"seconds": import_time_s(module, n)}


def b8_stalwart(n: int = 5) -> Result:
    return import_b8("stalwart", n)


# -- B12: the deploy gate ------------------------------------------------------------
@sw.policy(name="b12_lookup")
async def b12_lookup(ctx: sw.Context, order: str) -> dict[str, object]:
    return {"order": order, "amount": 120}


@sw.policy(name="b12_refund")
async def b12_refund(ctx: sw.Context, order: str) -> str:
    """Two recorded calls, then a wait for a person: a run a deploy finds waiting."""
    await b12_lookup(order=order)
    await b12_lookup(order=order + "/2")
    approved = await ctx.wait_for("approve")
    return "refunded" if approved else "kept"


async def _b12_waiting(url: str, n: int) -> None:
    """``n`` refunds, each suspended at its approval (set-up: not timed)."""
    async with sw.Runner(url, policies=[b12_refund, b12_lookup]) as runner:
        for i in range(n):
            await runner.start(b12_refund, order=f"A-{i}", run_id=f"refund-{i}")
        counts: dict[str, dict[str, int]] = {}
        while sum(counts.get("suspended", {}).values()) != n:
            await asyncio.sleep(0.05)
            counts = await runner.store.count_runs()


def _b12(url: str, n: int, one_by_one: bool) -> Result:
    from stalwart.deploy import check_deploy
    from stalwart.testing import replay_async

    async def main() -> float:
        await _b12_waiting(url, n)
        start = time.perf_counter()
        if one_by_one:  # what a script without the gate does: one replay test a run
            for i in range(n):
                report = await replay_async((url, f"refund-{i}"), b12_refund)
                assert report.ok, report
        else:
            report = await check_deploy(url, [b12_refund, b12_lookup], finished=0)
            assert report.ok and len(report.runs) == n, report
        return time.perf_counter() - start

    seconds = asyncio.run(main())
    return {"seconds": seconds, "runs_per_s": n / seconds}


def b12_stalwart_sqlite(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b12(_sqlite_url(tmp, "b12.db"), n, one_by_one=False)


def b12_floor_sqlite(n: int = 1_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b12(_sqlite_url(tmp, "b12.db"), n, one_by_one=True)


def b12_stalwart_postgres(n: int = 1_000) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        return _b12(pg_url_with(schema=schema), n, one_by_one=False)


# -- B14: finding runs by tag ------------------------------------------------------------
B14_CUSTOMERS = 100  # each customer tags n / 100 of the runs
B14_QUERIES = 200  # listings timed, each a page of one customer's runs


@sw.policy(name="b14_job")
async def b14_job(n: int) -> int:
    return n


def _b13(url: str, n: int, tagged: bool) -> Result:
    """``n`` runs, each tagged with one of :data:`B14_CUSTOMERS` customers
    (enqueued in batches, not timed), then :data:`B14_QUERIES` listings of
    one customer's runs (``tagged``), or of one unfiltered page (the floor)."""
    customers = max(1, min(B14_CUSTOMERS, n // 10))
    page = max(1, n // customers)

    async def main() -> float:
        async with sw.Runner(url, policies=[b14_job]) as runner:
            for c in range(customers):
                calls = [sw.RunCall(b14_job, i) for i in range(page)]
                for lo in range(0, page, BATCH):
                    await runner.enqueue_many(
                        calls[lo : lo + BATCH], queue="b13", tags={"customer": f"c-{c}"}
                    )
            store = runner.store
            start = time.perf_counter()
            for q in range(B14_QUERIES):
                if tagged:
                    rows = await store.list_runs(
                        limit=page, tags={"customer": f"c-{q % customers}"}
                    )
                else:
                    rows = await store.list_runs(limit=page)
                assert len(rows) == page, (len(rows), page)
            return time.perf_counter() - start

    seconds = asyncio.run(main())
    return {"seconds": seconds, "queries_per_s": B14_QUERIES / seconds}


def b14_stalwart_sqlite(n: int = 10_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b13(_sqlite_url(tmp, "b13.db"), n, tagged=True)


def b14_floor_sqlite(n: int = 10_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b13(_sqlite_url(tmp, "b13.db"), n, tagged=False)


def b14_stalwart_postgres(n: int = 10_000) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        return _b13(pg_url_with(schema=schema), n, tagged=True)


@sw.policy(name="b14_note")
async def b14_note(note: str) -> str:
    return note


def _b14_text(url: str, n: int) -> Result:
    """B14's runs, each with a note naming its customer among other words
    (enqueued in batches, not timed), then :data:`B14_QUERIES` listings of
    the runs whose values hold one customer's word: the store's full-text
    index (FTS5, or tsvector under GIN). The first search indexes the runs
    enqueued since the last one (stalwart.stores.search): timed apart, as
    ``index_seconds``."""
    customers = max(1, min(B14_CUSTOMERS, n // 10))
    page = max(1, n // customers)

    async def main() -> tuple[float, float]:
        async with sw.Runner(url, policies=[b14_note]) as runner:
            for c in range(customers):
                calls = [
                    sw.RunCall(b14_note, f"order {i} for customer{c}: refund requested")
                    for i in range(page)
                ]
                for lo in range(0, page, BATCH):
                    await runner.enqueue_many(calls[lo : lo + BATCH], queue="b14")
            store = runner.store
            start = time.perf_counter()
            await store.list_runs(limit=1, text="refund")
            indexed = time.perf_counter()
            for q in range(B14_QUERIES):
                rows = await store.list_runs(limit=page, text=f"customer{q % customers} refund")
                assert len(rows) == page, (len(rows), page)
            return indexed - start, time.perf_counter() - indexed

    index_seconds, seconds = asyncio.run(main())
    return {
        "seconds": seconds,
        "queries_per_s": B14_QUERIES / seconds,
        "index_seconds": index_seconds,
    }


def b14_text_sqlite(n: int = 10_000) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b14_text(_sqlite_url(tmp, "b14.db"), n)


def b14_text_postgres(n: int = 10_000) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        return _b14_text(pg_url_with(schema=schema), n)
