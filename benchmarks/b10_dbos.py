"""B10 for DBOS Transact: ``DBOSClient.enqueue`` and ``send`` against ``recv``.

The worker (``python -m benchmarks.b10_dbos worker URL SCHEMA``) launches
DBOS with its default settings and listens to queue "b10"; the producer is a
``DBOSClient`` in the benchmark's process, as DBOS's docs show for code
outside the application. The measurements are those of
:mod:`benchmarks.b10_wakeup`.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSClient

from ._util import Result, pg_schema, require_postgres
from .b10_wakeup import COLD, COLD_IDLE, GAP, spawn, stop, summary
from .dbos_app import config

QUEUE = "b10"


@DBOS.step()
def b10_now() -> float:
    return time.time()


@DBOS.workflow()
def b10_first() -> float:
    return b10_now()


@DBOS.workflow()
def b10_wait() -> float:
    b10_now()  # started: the producer sees this step, then sends
    DBOS.recv("go", timeout_seconds=120)
    return b10_now()


def _measure(client: DBOSClient, n: int, cold: int) -> Result:
    def enqueued() -> float:
        sent = time.time()
        handle = client.enqueue({"workflow_name": "b10_first", "queue_name": QUEUE})
        return float(handle.get_result()) - sent

    def signalled() -> float:
        wid = uuid.uuid4().hex
        handle = client.enqueue(
            {"workflow_name": "b10_wait", "queue_name": QUEUE, "workflow_id": wid}
        )
        while not client.list_workflow_steps(wid):
            time.sleep(0.005)
        time.sleep(GAP)  # inside recv by now
        sent = time.time()
        client.send(wid, "approved", "go")
        return float(handle.get_result()) - sent

    def samples(count: int, one: Any, gap: float) -> list[float]:
        out = []
        for _ in range(count):
            time.sleep(gap)
            out.append(one())
        return out

    enqueued()
    signalled()
    out = summary("enqueue", samples(n, enqueued, GAP))
    out |= summary("signal", samples(n, signalled, 0.0))
    if cold:
        out["cold_enqueue_ms"] = 1000 * statistics.median(samples(cold, enqueued, COLD_IDLE))
    return out


def _dbos(url: str, schema: str | None, n: int) -> Result:
    proc = spawn([sys.executable, "-m", "benchmarks.b10_dbos", "worker", url, schema or ""])
    try:
        kwargs: dict[str, Any] = {"system_database_url": url}
        if schema is not None:
            kwargs["dbos_system_schema"] = schema
        client = DBOSClient(**kwargs)
        try:
            start = time.perf_counter()
            out = _measure(client, n, COLD if n >= 20 else 0)
            out["seconds"] = time.perf_counter() - start
        finally:
            client.destroy()
        return out
    finally:
        stop(proc)


def on_postgres(n: int) -> Result:
    require_postgres()
    from ._util import PG_URL

    with pg_schema("dbos") as schema:
        return _dbos(PG_URL, schema, n)


def on_sqlite(n: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _dbos(f"sqlite:///{Path(tmp) / 'dbos.sqlite'}", None, n)


def _worker(url: str, schema: str) -> None:
    import logging

    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config=config(url, schema or None))
    DBOS.launch()
    DBOS.register_queue(QUEUE)
    print("serving", flush=True)
    stop_event = threading.Event()
    import signal

    signal.signal(signal.SIGTERM, lambda *_: stop_event.set())
    stop_event.wait()
    DBOS.destroy()


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        _worker(sys.argv[2], sys.argv[3])
