"""What the suite runs: each workload's spec, its subjects, and the aims checked.

A subject is one way of doing a workload: Stalwart on a backend, the floor
(the cheapest thing that could do the same job), or a peer. Functions are
named as ``module:function`` within this package and looked up only in the
process that runs them, so a missing peer never breaks the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Column:
    key: str
    label: str


@dataclass(frozen=True)
class Subject:
    name: str
    fn: str  # "module:function" in this package
    kind: str  # "stalwart", "floor" or "peer"
    compare_to: str | None = None  # the Stalwart subject a peer is compared with
    postgres: bool = False
    # The floor this subject is measured against when not the spec's (a row
    # with other settings, or on the other database, has its own floor).
    floor: str | None = None
    # The Stalwart subject at the peer's own durability settings (SQLite
    # synchronous=FULL), so each lead is also shown like for like.
    equal: str | None = None

    def load(self) -> Callable[..., dict[str, Any]]:
        module, _, func = self.fn.partition(":")
        fn: Callable[..., dict[str, Any]] = getattr(
            importlib.import_module(f"benchmarks.{module}"), func
        )
        return fn


@dataclass(frozen=True)
class Spec:
    id: str
    title: str
    metric: Column  # the headline measurement
    higher_is_better: bool
    smoke_n: int
    aim: str
    subjects: tuple[Subject, ...]
    columns: tuple[Column, ...] = field(default=())  # more measurements shown
    floor: str | None = None  # the subject every other is compared with


def _s(
    name: str,
    fn: str,
    compare_to: str | None = None,
    *,
    floor: str | None = None,
    equal: str | None = None,
) -> Subject:
    kind = (
        "stalwart"
        if name.startswith("stalwart")
        else "floor"
        if name.startswith("floor")
        else "peer"
    )
    pg = "postgres" in name or "psycopg" in name
    return Subject(name, fn, kind, compare_to, postgres=pg, floor=floor, equal=equal)


FULL = "stalwart sqlite synchronous=FULL"  # fsync every commit, as the SQLite peers do


US = Column("per_call_us", "µs per call")
RATE = Column("steps_per_s", "steps/s")
BYTES = Column("bytes_per_step", "bytes/step")
SECONDS = Column("seconds", "seconds")
RUNS = Column("runs_per_s", "runs/s")
QUERIES = Column("queries_per_s", "listings/s")
PAGES = Column("ms_per_page", "ms per page")

SPECS: dict[str, Spec] = {
    s.id: s
    for s in (
        Spec(
            "B1",
            "10,000 sequential calls in memory, no durability",
            US,
            False,
            50,
            "≤ 1 µs a call",
            (
                _s("floor: bare await", "workloads:b1_floor"),
                _s("stalwart memory", "workloads:b1_stalwart"),
                _s("stalwart.flow Flow", "workloads:b1_stalwart_flow"),
                _s("stalwart.flow AsyncFlow", "workloads:b1_stalwart_async_flow"),
                _s("pocketflow Flow", "peers:b1_pocketflow", "stalwart.flow Flow"),
                _s("pocketflow AsyncFlow", "peers:b1_pocketflow_async", "stalwart.flow AsyncFlow"),
                _s("langgraph memory", "peers:b1_langgraph", "stalwart memory"),
            ),
            floor="floor: bare await",
        ),
        Spec(
            "B2",
            "one run of 1,000 sequential durable steps on SQLite",
            RATE,
            True,
            20,
            "≥ 70% of the floor",
            (
                _s("floor: sqlite3 INSERT+COMMIT", "workloads:b2_floor"),
                _s("floor: sqlite3 INSERT+COMMIT, synchronous=FULL", "workloads:b2_floor_full"),
                _s("stalwart sqlite", "workloads:b2_stalwart"),
                _s("stalwart sqlite encrypted", "workloads:b2_stalwart_encrypted"),
                _s("stalwart sqlite durability=group", "workloads:b2_stalwart_group"),
                _s(
                    FULL,
                    "workloads:b2_stalwart_full",
                    floor="floor: sqlite3 INSERT+COMMIT, synchronous=FULL",
                ),
                _s("langgraph SqliteSaver", "peers:b2_langgraph", "stalwart sqlite", equal=FULL),
                _s("dbos sqlite", "peers:b2_dbos", "stalwart sqlite", equal=FULL),
            ),
            (BYTES,),
            floor="floor: sqlite3 INSERT+COMMIT",
        ),
        Spec(
            "B3",
            "one run of 1,000 sequential durable steps on PostgreSQL",
            RATE,
            True,
            20,
            "≥ 80% of the floor",
            (
                _s("floor: psycopg autocommit INSERT", "workloads:b3_floor"),
                _s("floor: psycopg INSERT; COMMIT", "workloads:b3_floor_tx"),
                _s("floor: async psycopg autocommit INSERT", "workloads:b3_floor_async"),
                _s("stalwart postgres", "workloads:b3_stalwart"),
                _s("stalwart postgres encrypted", "workloads:b3_stalwart_encrypted"),
                _s("langgraph PostgresSaver", "peers:b3_langgraph", "stalwart postgres"),
                _s("dbos postgres", "peers:b3_dbos", "stalwart postgres"),
            ),
            (BYTES,),
            floor="floor: psycopg autocommit INSERT",
        ),
        Spec(
            "B4",
            "one run fanning out 1,000 concurrent durable steps, each awaiting 10 ms",
            SECONDS,
            False,
            20,
            "≤ 5x the floor on SQLite and PostgreSQL",
            (
                _s("floor: asyncio.gather", "workloads:b4_floor"),
                _s("stalwart memory", "workloads:b4_stalwart_memory"),
                _s("stalwart sqlite", "workloads:b4_stalwart_sqlite"),
                _s(FULL, "workloads:b4_stalwart_sqlite_full"),
                _s("stalwart postgres", "workloads:b4_stalwart_postgres"),
                _s(
                    "langgraph Send + SqliteSaver",
                    "peers:b4_langgraph_sqlite",
                    "stalwart sqlite",
                    equal=FULL,
                ),
                _s(
                    "langgraph Send + PostgresSaver",
                    "peers:b4_langgraph_postgres",
                    "stalwart postgres",
                ),
                _s("dbos sqlite", "peers:b4_dbos_sqlite", "stalwart sqlite", equal=FULL),
                _s("dbos postgres", "peers:b4_dbos_postgres", "stalwart postgres"),
            ),
            floor="floor: asyncio.gather",
        ),
        Spec(
            "B5",
            "a 1,000-step run killed with SIGKILL after ~500 steps, then recovered",
            Column("restart_to_done_s", "restart to done, s"),
            False,
            40,
            "re-execute ≤ 1; restart to done ≤ 0.2 s (SQLite), 0.3 s (PostgreSQL) after start-up",
            (
                _s("stalwart sqlite", "workloads:b5_stalwart_sqlite"),
                _s(FULL, "workloads:b5_stalwart_sqlite_full"),
                _s("stalwart postgres", "workloads:b5_stalwart_postgres"),
                _s(
                    "langgraph SqliteSaver",
                    "peers:b5_langgraph_sqlite",
                    "stalwart sqlite",
                    equal=FULL,
                ),
                _s("langgraph PostgresSaver", "peers:b5_langgraph_postgres", "stalwart postgres"),
                _s("dbos sqlite", "peers:b5_dbos_sqlite", "stalwart sqlite", equal=FULL),
                _s("dbos postgres", "peers:b5_dbos_postgres", "stalwart postgres"),
            ),
            (
                Column("beyond_interpreter_s", "beyond interpreter start, s"),
                Column("seconds", "open to done, in process, s"),
                Column("resume_s", "open to first live step (replay), s"),
                Column("re_executed", "steps re-executed"),
            ),
        ),
        Spec(
            "B6",
            "2,000 small runs (one step each) drained from a PostgreSQL queue",
            Column("runs_per_s", "runs/s"),
            True,
            40,
            "≥ 3,000 runs/s with 2 workers; throughput grows with workers",
            (
                _s("stalwart postgres, 1 worker", "workloads:b6_stalwart_1"),
                _s("stalwart postgres, 2 workers", "workloads:b6_stalwart_2"),
                _s("dbos postgres, 1 worker", "peers:b6_dbos_1", "stalwart postgres, 1 worker"),
                _s("dbos postgres, 2 workers", "peers:b6_dbos_2", "stalwart postgres, 2 workers"),
            ),
            (
                Column("wall_runs_per_s", "runs/s from 'go' (start-up included)"),
                Column("busiest_worker_share", "busiest worker's share"),
                Column("enqueue_per_s", "enqueued/s (one by one)"),
            ),
        ),
        Spec(
            "B7",
            "runs suspended waiting for a signal (100,000 on SQLite, 10,000 on PostgreSQL)",
            Column("rss_growth_mb", "worker RSS growth, MB"),
            False,
            20,
            "a worker's memory does not grow with them; resuming one costs one replay",
            (
                _s("stalwart sqlite", "workloads:b7_stalwart_sqlite"),
                _s("stalwart postgres", "workloads:b7_stalwart_postgres"),
            ),
            (
                Column("live_runs_held", "runs held in memory"),
                Column("suspended_per_s", "started and suspended/s"),
                Column("resume_one_s", "resume one, s"),
            ),
        ),
        Spec(
            "B8",
            "import time in a fresh interpreter",
            SECONDS,
            False,
            1,
            "≤ 0.1 s",
            (
                _s("stalwart", "workloads:b8_stalwart"),
                _s("pocketflow", "peers:b8_pocketflow", "stalwart"),
                _s("langgraph", "peers:b8_langgraph", "stalwart"),
                _s("dbos", "peers:b8_dbos", "stalwart"),
            ),
        ),
        Spec(
            "B9",
            "an agent loop of N turns (quickstart loop, scripted model, ~1 KB tool results)",
            Column("ledger_x", "ledger ÷ content"),
            False,
            12,
            "ledger ≤ 2x the tool output's bytes at every N; turn N within 1.5x of turn 10",
            (
                _s("stalwart sqlite, 10 turns", "b9_agent_ledger:stalwart_sqlite_10"),
                _s("stalwart sqlite, 100 turns", "b9_agent_ledger:stalwart_sqlite"),
                _s(
                    "stalwart sqlite encrypted, 100 turns",
                    "b9_agent_ledger:stalwart_sqlite_encrypted",
                ),
                _s("stalwart sqlite, 1000 turns", "b9_agent_ledger:stalwart_sqlite_1000"),
                _s("stalwart postgres, 10 turns", "b9_agent_ledger:stalwart_postgres_10"),
                _s("stalwart postgres, 100 turns", "b9_agent_ledger:stalwart_postgres"),
                _s(
                    "stalwart postgres encrypted, 100 turns",
                    "b9_agent_ledger:stalwart_postgres_encrypted",
                ),
                _s("stalwart postgres, 1000 turns", "b9_agent_ledger:stalwart_postgres_1000"),
                _s(
                    "langgraph sqlite, 10 turns",
                    "b9_agent_ledger:langgraph_sqlite_10",
                    "stalwart sqlite, 10 turns",
                ),
                _s(
                    "langgraph sqlite, 100 turns",
                    "b9_agent_ledger:langgraph_sqlite",
                    "stalwart sqlite, 100 turns",
                ),
            ),
            (
                Column("ledger_bytes", "ledger bytes"),
                Column("content_bytes", "tool output bytes"),
                Column("db_bytes", "store on disk, bytes"),
                Column("turn_ratio", "last turns ÷ first 10"),
                Column("seconds", "seconds"),
            ),
        ),
        Spec(
            "B10",
            "wake-ups from another process: enqueue -> first step, signal -> resume",
            Column("enqueue_p50_ms", "enqueue -> first step p50, ms"),
            False,
            3,
            "PostgreSQL p50 ≤ 10 ms, p99 ≤ 50 ms; SQLite p50 ≤ 50 ms",
            (
                _s("stalwart postgres", "b10_wakeup:b10_stalwart_postgres"),
                _s("stalwart sqlite", "b10_wakeup:b10_stalwart_sqlite"),
                _s("dbos postgres", "b10_wakeup:b10_dbos_postgres", "stalwart postgres"),
                _s("dbos sqlite", "b10_wakeup:b10_dbos_sqlite", "stalwart sqlite"),
            ),
            (
                Column("enqueue_p99_ms", "enqueue p99, ms"),
                Column("signal_p50_ms", "signal -> resume p50, ms"),
                Column("signal_p99_ms", "signal p99, ms"),
                Column("cold_enqueue_ms", "enqueue after 3 s idle, ms"),
            ),
        ),
        Spec(
            "B11",
            "enqueuing runs (20,000 in batches of 1,000; 2,000 one at a time)",
            RUNS,
            True,
            40,
            "batch ≥ 20,000 runs/s on PostgreSQL and SQLite; one at a time ≥ 80% of a "
            "raw INSERT+COMMIT",
            (
                _s(
                    "floor: sqlite3 executemany, one COMMIT a batch",
                    "workloads:b11_floor_sqlite_batch",
                ),
                _s(
                    "stalwart sqlite enqueue_many",
                    "workloads:b11_stalwart_sqlite_batch",
                    floor="floor: sqlite3 executemany, one COMMIT a batch",
                ),
                _s(
                    "floor: psycopg executemany, one COMMIT a batch",
                    "workloads:b11_floor_postgres_batch",
                ),
                _s(
                    "stalwart postgres enqueue_many",
                    "workloads:b11_stalwart_postgres_batch",
                    floor="floor: psycopg executemany, one COMMIT a batch",
                ),
                _s("floor: sqlite3 INSERT+COMMIT a run", "workloads:b11_floor_sqlite"),
                _s(
                    "floor: sqlite3 INSERT+COMMIT a run into Stalwart's runs table",
                    "workloads:b11_floor_sqlite_runs",
                    floor="floor: sqlite3 INSERT+COMMIT a run",
                ),
                _s(
                    "stalwart sqlite enqueue",
                    "workloads:b11_stalwart_sqlite",
                    floor="floor: sqlite3 INSERT+COMMIT a run",
                ),
                _s("floor: psycopg INSERT; COMMIT a run", "workloads:b11_floor_postgres"),
                _s(
                    "stalwart postgres enqueue",
                    "workloads:b11_stalwart_postgres",
                    floor="floor: psycopg INSERT; COMMIT a run",
                ),
            ),
            floor="floor: sqlite3 executemany, one COMMIT a batch",
        ),
        Spec(
            "B12",
            "the deploy gate: 1,000 waiting runs (2 steps each) replayed against new code",
            RUNS,
            True,
            20,
            "≥ 100 runs/s replayed on SQLite",
            (
                _s("floor: replay_async of one run, in a loop", "workloads:b12_floor_sqlite"),
                _s(
                    "stalwart sqlite deploy check",
                    "workloads:b12_stalwart_sqlite",
                    floor="floor: replay_async of one run, in a loop",
                ),
                _s("stalwart postgres deploy check", "workloads:b12_stalwart_postgres"),
            ),
            floor="floor: replay_async of one run, in a loop",
        ),
        Spec(
            "B13",
            "a counterfactual fork at the last of 11 model steps vs a fresh run of the case",
            Column("ms_per_case", "ms per case"),
            False,
            3,
            "a fork asks the model once; it costs less than the fresh run",
            (
                _s("floor: a fresh run of the case", "b13_counterfactual:b13_fresh_sqlite"),
                _s(
                    "stalwart sqlite counterfactual fork",
                    "b13_counterfactual:b13_fork_sqlite",
                    floor="floor: a fresh run of the case",
                ),
            ),
            columns=(Column("model_calls_per_case", "model calls per case"),),
            floor="floor: a fresh run of the case",
        ),
        Spec(
            "B14",
            "finding runs by tag or text: 10,000 runs of 100 customers, a page of one customer's",
            QUERIES,
            True,
            200,
            "a tag filter ≥ 50% of an unfiltered page's rate on SQLite",
            (
                _s("floor: list_runs of one page, no filter", "workloads:b14_floor_sqlite"),
                _s(
                    "stalwart sqlite list_runs by tag",
                    "workloads:b14_stalwart_sqlite",
                    floor="floor: list_runs of one page, no filter",
                ),
                _s("stalwart postgres list_runs by tag", "workloads:b14_stalwart_postgres"),
                _s(
                    "stalwart sqlite list_runs by text",
                    "workloads:b14_text_sqlite",
                    floor="floor: list_runs of one page, no filter",
                ),
                _s("stalwart postgres list_runs by text", "workloads:b14_text_postgres"),
            ),
            floor="floor: list_runs of one page, no filter",
        ),
        Spec(
            "B15",
            "the inspector's page of a 1,000-step agent run (500 turns, a tool call each)",
            PAGES,
            False,
            2,
            "a run page in < 1,000 ms on SQLite",
            (
                _s("floor: the store's reads for the page", "b15_run_page:b15_floor_sqlite"),
                _s(
                    "stalwart sqlite run page",
                    "b15_run_page:b15_stalwart_sqlite",
                    floor="floor: the store's reads for the page",
                ),
                _s("stalwart postgres run page", "b15_run_page:b15_stalwart_postgres"),
            ),
            columns=(Column("cpu_ms_per_page", "CPU ms per page"),),
            floor="floor: the store's reads for the page",
        ),
        Spec(
            "B16",
            "an experiment: a dataset of cases run as durable child runs and scored, no-op model",
            Column("cases_per_s", "cases/s"),
            True,
            10,
            "≥ 50% of the floor's rate on SQLite (plain runs of the cases, unscored)",
            (
                _s("floor: a plain run of each case", "b16_experiment:b16_floor_sqlite"),
                _s(
                    "stalwart sqlite experiment",
                    "b16_experiment:b16_stalwart_sqlite",
                    floor="floor: a plain run of each case",
                ),
                _s("stalwart postgres experiment", "b16_experiment:b16_stalwart_postgres"),
            ),
            floor="floor: a plain run of each case",
        ),
    )
}


# -- the aims (docs/performance.md), checked against a run's rows --------------------------
Rows = dict[tuple[str, str], dict[str, Any]]


def _median(rows: Rows, wid: str, subject: str, key: str) -> float | None:
    row = rows.get((wid, subject))
    if not row or row.get("status") != "ok" or key not in row.get("stats", {}):
        return None
    return float(row["stats"][key]["median"])


def aims(rows: Rows) -> list[tuple[str, str, str, bool | None]]:
    """(workload, aim, what was measured, met?) for every aim that was measured."""
    out: list[tuple[str, str, str, bool | None]] = []

    def add(wid: str, aim: str, measured: str | None, ok: bool | None) -> None:
        if measured is not None:
            out.append((wid, aim, measured, ok))

    m = _median(rows, "B1", "stalwart memory", "per_call_us")
    add(
        "B1",
        "in-memory call ≤ 1 µs",
        None if m is None else f"{m:.2f} µs",
        m is not None and m <= 1,
    )
    m = _median(rows, "B1", "stalwart.flow Flow", "per_call_us")
    if m is not None:
        add("B1", "stalwart.flow node step ≤ 2 µs", f"{m:.2f} µs", m <= 2)
    for wid, sub, floor, share in (
        ("B2", "stalwart sqlite", "floor: sqlite3 INSERT+COMMIT", 0.7),
        ("B3", "stalwart postgres", "floor: psycopg autocommit INSERT", 0.8),
    ):
        a = _median(rows, wid, sub, "steps_per_s")
        b = _median(rows, wid, floor, "steps_per_s")
        if a is not None and b is not None:
            add(
                wid,
                f"≥ {share:.0%} of the floor's commit rate",
                f"{a:,.0f} steps/s = {a / b:.0%} of {b:,.0f}",
                a >= share * b,
            )
    m = _median(rows, "B12", "stalwart sqlite deploy check", "runs_per_s")
    add(
        "B12",
        "deploy check ≥ 100 runs/s on SQLite",
        None if m is None else f"{m:,.0f} runs/s",
        m is not None and m >= 100,
    )
    a = _median(rows, "B14", "stalwart sqlite list_runs by tag", "queries_per_s")
    b = _median(rows, "B14", "floor: list_runs of one page, no filter", "queries_per_s")
    if a is not None and b is not None:
        add(
            "B14",
            "a tag filter ≥ 50% of an unfiltered page on SQLite",
            f"{a:,.0f} listings/s = {a / b:.0%} of {b:,.0f}",
            a >= 0.5 * b,
        )
    m = _median(rows, "B15", "stalwart sqlite run page", "ms_per_page")
    add(
        "B15",
        "a 1,000-step run's page < 1,000 ms on SQLite",
        None if m is None else f"{m:,.0f} ms",
        m is not None and m < 1000,
    )
    gather = _median(rows, "B4", "floor: asyncio.gather", "seconds")
    for sub in ("stalwart sqlite", "stalwart postgres"):
        a = _median(rows, "B4", sub, "seconds")
        if a is not None and gather:
            add(
                "B4",
                f"{sub}: ≤ 5x asyncio.gather",
                f"{a:.3f} s = {a / gather:.1f}x",
                a <= 5 * gather,
            )
    for sub in ("stalwart sqlite", "stalwart postgres"):
        r = rows.get(("B5", sub))
        if r and r.get("status") == "ok":
            worst = r["stats"]["re_executed"]["max"]
            beyond = r["stats"]["beyond_interpreter_s"]["median"]
            add("B5", f"{sub}: re-executed ≤ 1", f"at most {worst:.0f}", worst <= 1)
            limit = 0.2 if "sqlite" in sub else 0.3
            add(
                "B5",
                f"{sub}: restart to done ≤ {limit} s beyond interpreter start",
                f"{beyond:.3f} s",
                beyond <= limit,
            )
    one = _median(rows, "B6", "stalwart postgres, 1 worker", "runs_per_s")
    two = _median(rows, "B6", "stalwart postgres, 2 workers", "runs_per_s")
    if two is not None:
        add("B6", "≥ 3,000 runs/s with 2 workers", f"{two:,.0f} runs/s", two >= 3000)
    if one is not None and two is not None:
        add("B6", "throughput grows with workers", f"x{two / one:.2f} from 1 to 2", two > one)
    for sub in ("stalwart sqlite", "stalwart postgres"):
        r = rows.get(("B7", sub))
        if r and r.get("status") == "ok":
            held = r["stats"]["live_runs_held"]["max"]
            grow = r["stats"]["rss_growth_mb"]["median"]
            add(
                "B7",
                f"{sub}: no run held in memory while suspended; memory flat",
                f"{held:.0f} held, RSS +{grow:.1f} MB",
                held == 0 and grow <= 10,
            )
    for db in ("sqlite", "postgres"):
        for turns in (10, 100, 1000):
            sub = f"stalwart {db}, {turns} turns"
            x = _median(rows, "B9", sub, "ledger_x")
            if x is not None:
                add("B9", f"{sub}: ledger ≤ 2x content", f"{x:.2f}x", x <= 2)
            t = _median(rows, "B9", sub, "turn_ratio")
            if t is not None and turns > 10:
                add("B9", f"{sub}: turn N ≤ 1.5x turn 10", f"{t:.2f}x", t <= 1.5)
    for sub, p50_aim, p99_aim in (("stalwart postgres", 10, 50), ("stalwart sqlite", 50, None)):
        for what in ("enqueue", "signal"):
            p50 = _median(rows, "B10", sub, f"{what}_p50_ms")
            p99 = _median(rows, "B10", sub, f"{what}_p99_ms")
            if p50 is not None:
                add("B10", f"{sub}: {what} p50 ≤ {p50_aim} ms", f"{p50:.1f} ms", p50 <= p50_aim)
            if p99 is not None and p99_aim is not None:
                add("B10", f"{sub}: {what} p99 ≤ {p99_aim} ms", f"{p99:.1f} ms", p99 <= p99_aim)
    for sub in ("stalwart sqlite enqueue_many", "stalwart postgres enqueue_many"):
        m = _median(rows, "B11", sub, "runs_per_s")
        if m is not None:
            add("B11", f"{sub}: ≥ 20,000 runs/s", f"{m:,.0f} runs/s", m >= 20_000)
    for sub, floor_name in (
        ("stalwart sqlite enqueue", "floor: sqlite3 INSERT+COMMIT a run"),
        ("stalwart postgres enqueue", "floor: psycopg INSERT; COMMIT a run"),
    ):
        a = _median(rows, "B11", sub, "runs_per_s")
        b = _median(rows, "B11", floor_name, "runs_per_s")
        if a is not None and b is not None:
            add(
                "B11",
                f"{sub}: ≥ 80% of a raw INSERT+COMMIT",
                f"{a:,.0f} runs/s = {a / b:.0%} of {b:,.0f}",
                a >= 0.8 * b,
            )
    m = _median(rows, "B8", "stalwart", "seconds")
    add(
        "B8",
        "import stalwart ≤ 0.1 s",
        None if m is None else f"{m:.3f} s",
        m is not None and m <= 0.1,
    )
    return out
