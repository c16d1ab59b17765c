"""The peers' workloads: PocketFlow, LangGraph, DBOS Transact, from PyPI.

Each function raises :class:`~benchmarks._util.Unavailable` ("not installed")
when its peer is missing, so the suite runs without them. The peers run the
way their docs recommend: PocketFlow's graph of nodes; LangGraph's
``StateGraph`` with its SQLite and PostgreSQL checkpointers and
``durability="sync"``; DBOS workflows and steps with default settings.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._util import (
    PG_URL,
    Result,
    pg_schema,
    pg_schema_bytes,
    require,
    require_postgres,
    sqlite_bytes,
)
from .workloads import APPS, drain, flow_b1, import_b8, kill_and_recover

# -- PocketFlow ---------------------------------------------------------------------


def b1_pocketflow(n: int = 10_000) -> Result:
    return flow_b1("pocketflow", False, n)


def b1_pocketflow_async(n: int = 10_000) -> Result:
    return flow_b1("pocketflow", True, n)


def b8_pocketflow(n: int = 5) -> Result:
    return import_b8("pocketflow", n)


# -- LangGraph ----------------------------------------------------------------------


def b1_langgraph(n: int = 10_000) -> Result:
    require("langgraph")
    from . import langgraph_app as lg

    app = lg.loop_graph().compile()
    start = time.perf_counter()
    out = app.invoke({"i": 0, "n": n}, lg.config(n))
    seconds = time.perf_counter() - start
    assert out["i"] == n
    return {"seconds": seconds, "per_call_us": seconds / n * 1e6}


def _lg_sequential(url: str, n: int, size: Any) -> Result:
    from . import langgraph_app as lg

    with lg.saver(url) as saver:
        app = lg.loop_graph().compile(checkpointer=saver)
        before = size()
        start = time.perf_counter()
        out = app.invoke({"i": 0, "n": n}, lg.config(n), durability="sync")
        seconds = time.perf_counter() - start
    assert out["i"] == n
    return {
        "seconds": seconds,
        "steps_per_s": n / seconds,
        "bytes_per_step": (size() - before) / n,
    }


def b2_langgraph(n: int = 1_000) -> Result:
    require("langgraph", "langgraph.checkpoint.sqlite")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "lg.db"
        return _lg_sequential(f"sqlite:///{db}", n, lambda: sqlite_bytes(db))


def b3_langgraph(n: int = 1_000) -> Result:
    require("langgraph", "langgraph.checkpoint.postgres")
    require_postgres()
    from . import langgraph_app as lg

    with pg_schema("lg", create=True) as schema:
        url = lg.pg_conninfo(PG_URL, schema)
        return _lg_sequential(url, n, lambda: pg_schema_bytes(schema))


def _lg_fanout(url: str, n: int) -> Result:
    from . import langgraph_app as lg

    async def main() -> float:
        async with lg.async_saver(url) as saver:
            app = lg.fan_graph().compile(checkpointer=saver)
            start = time.perf_counter()
            out = await app.ainvoke({"n": n, "results": []}, lg.config(n), durability="sync")
            seconds = time.perf_counter() - start
        assert len(out["results"]) == n
        return seconds

    return {"seconds": asyncio.run(main())}


def b4_langgraph_sqlite(n: int = 1_000) -> Result:
    require("langgraph", "langgraph.checkpoint.sqlite", "aiosqlite")
    with tempfile.TemporaryDirectory() as tmp:
        return _lg_fanout(f"sqlite:///{Path(tmp) / 'lg.db'}", n)


def b4_langgraph_postgres(n: int = 1_000) -> Result:
    require("langgraph", "langgraph.checkpoint.postgres")
    require_postgres()
    from . import langgraph_app as lg

    with pg_schema("lg", create=True) as schema:
        return _lg_fanout(lg.pg_conninfo(PG_URL, schema), n)


def b5_langgraph_sqlite(n: int = 1_000) -> Result:
    require("langgraph", "langgraph.checkpoint.sqlite")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'lg.db'}"
        return kill_and_recover([*APPS, "langgraph-b5", url], n, tmp)


def b5_langgraph_postgres(n: int = 1_000) -> Result:
    require("langgraph", "langgraph.checkpoint.postgres")
    require_postgres()
    from . import langgraph_app as lg

    with pg_schema("lg", create=True) as schema, tempfile.TemporaryDirectory() as tmp:
        url = lg.pg_conninfo(PG_URL, schema)
        return kill_and_recover([*APPS, "langgraph-b5", url], n, tmp)


def b8_langgraph(n: int = 5) -> Result:
    return import_b8("langgraph.graph", n)


# -- DBOS Transact ---------------------------------------------------------------------


def _dbos_timed(url: str, schema: str | None, fn_name: str, n: int, size: Any) -> Result:
    from . import dbos_app

    dbos_app.launch(url, schema)
    try:
        before = size()
        start = time.perf_counter()
        result = dbos_app.run_workflow(getattr(dbos_app, fn_name), n)
        seconds = time.perf_counter() - start
        after = size()
    finally:
        dbos_app.destroy()
    assert result == n, result
    return {"seconds": seconds, "steps_per_s": n / seconds, "bytes_per_step": (after - before) / n}


def b2_dbos(n: int = 1_000) -> Result:
    require("dbos")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "dbos.sqlite"
        return _dbos_timed(f"sqlite:///{db}", None, "sequential", n, lambda: sqlite_bytes(db))


def b3_dbos(n: int = 1_000) -> Result:
    require("dbos")
    require_postgres()
    with pg_schema("dbos") as schema:
        return _dbos_timed(PG_URL, schema, "sequential", n, lambda: pg_schema_bytes(schema))


def b4_dbos_sqlite(n: int = 1_000) -> Result:
    require("dbos")
    with tempfile.TemporaryDirectory() as tmp:
        out = _dbos_timed(f"sqlite:///{Path(tmp) / 'dbos.sqlite'}", None, "fanout", n, int)
    return {"seconds": out["seconds"]}


def b4_dbos_postgres(n: int = 1_000) -> Result:
    require("dbos")
    require_postgres()
    with pg_schema("dbos") as schema:
        out = _dbos_timed(PG_URL, schema, "fanout", n, int)
    return {"seconds": out["seconds"]}


def b5_dbos_sqlite(n: int = 1_000) -> Result:
    require("dbos")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'dbos.sqlite'}"
        return kill_and_recover([*APPS, "dbos-b5", url, ""], n, tmp)


def b5_dbos_postgres(n: int = 1_000) -> Result:
    require("dbos")
    require_postgres()
    with pg_schema("dbos") as schema, tempfile.TemporaryDirectory() as tmp:
        return kill_and_recover([*APPS, "dbos-b5", PG_URL, schema], n, tmp)


def b6_dbos(workers: int, n: int) -> Result:
    require("dbos")
    require_postgres()
    import psycopg

    from . import dbos_app

    with pg_schema("dbos") as schema:
        start = time.perf_counter()
        dbos_app.b6_enqueue(PG_URL, schema, n)
        enqueue_s = time.perf_counter() - start
        table = f'"{schema}".workflow_status'

        def query(sql: str) -> list[tuple[Any, ...]]:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                return conn.execute(sql).fetchall()

        def done() -> int:
            rows = query(
                f"SELECT count(*) FROM {table} WHERE status = 'SUCCESS' AND queue_name = 'b6'"
            )
            return int(rows[0][0])

        def window() -> tuple[float, float, list[int]]:
            (first, last), *_ = query(
                f"SELECT min(started_at_epoch_ms), max(completed_at) FROM {table} "
                "WHERE queue_name = 'b6'"
            )
            shares = query(f"SELECT count(*) FROM {table} WHERE queue_name = 'b6' GROUP BY output")
            return first / 1000, last / 1000, [int(r[0]) for r in shares]

        cmd = [*APPS, "dbos-b6", PG_URL, schema]
        out = drain([cmd] * workers, n, done, window)
    out["enqueue_per_s"] = n / enqueue_s
    return out


def b6_dbos_1(n: int = 2_000) -> Result:
    return b6_dbos(1, n)


def b6_dbos_2(n: int = 2_000) -> Result:
    return b6_dbos(2, n)


def b8_dbos(n: int = 5) -> Result:
    return import_b8("dbos", n)


if __name__ == "__main__":  # a quick look: python -m benchmarks.peers NAME [N]
    print(globals()[sys.argv[1]](*map(int, sys.argv[2:])))
