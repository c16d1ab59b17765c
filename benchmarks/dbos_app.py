"""DBOS Transact's side of the workloads: workflows and steps, registered on import.

Imported only when ``dbos`` is installed. DBOS runs with its default settings
(log level aside); each workload gives it a fresh system database (a SQLite
file, or a PostgreSQL schema through ``dbos_system_schema``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID

B6_QUEUE = "b6"


def config(url: str, schema: str | None = None) -> DBOSConfig:
    cfg: DBOSConfig = {"name": "stalwart-bench", "system_database_url": url, "log_level": "WARNING"}
    if schema is not None:
        cfg["dbos_system_schema"] = schema
    return cfg


def launch(url: str, schema: str | None = None, listen: list[str] | None = None) -> None:
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config=config(url, schema))
    if listen is not None:
        DBOS.listen_queues(listen)
    DBOS.launch()


def destroy() -> None:
    DBOS.destroy()


# -- B2/B3: sequential steps ---------------------------------------------------------
@DBOS.step()
def noop(i: int) -> int:
    return i


@DBOS.workflow()
def sequential(n: int) -> int:
    for i in range(n):
        noop(i)
    return n


# -- B4: fan-out ---------------------------------------------------------------------
@DBOS.step()
async def io_step(i: int) -> int:
    await asyncio.sleep(0.01)
    return i


@DBOS.workflow()
async def fanout(n: int) -> int:
    results = await asyncio.gather(*(io_step(i) for i in range(n)))
    return len(results)


# -- B5: kill and recover --------------------------------------------------------------
FIRST_LIVE: list[float] = []


@DBOS.step()
def counted(i: int, counter: str) -> int:
    if not FIRST_LIVE:
        FIRST_LIVE.append(time.perf_counter())
    with open(counter, "a") as f:
        f.write(f"{i}\n")
    return i


@DBOS.workflow()
def long_run(n: int, counter: str) -> int:
    total = 0
    for i in range(n):
        total += counted(i, counter)
        print(f"done {i}", flush=True)
    return total


def b5_main(url: str, schema: str, counter: str, action: str, n: int) -> None:
    if action == "run":
        launch(url, schema or None)
        with SetWorkflowID("b5"):
            long_run(n, counter)
        return
    start = time.perf_counter()
    launch(url, schema or None)  # recovers this executor's pending workflows
    result = DBOS.retrieve_workflow("b5").get_result()
    assert result == sum(range(n)), result
    print(f"recovered_in {time.perf_counter() - start}", flush=True)
    print(f"first_live_in {(FIRST_LIVE or [time.perf_counter()])[0] - start}", flush=True)
    destroy()


# -- B6: a queue of small workflows ------------------------------------------------------
@DBOS.workflow()
def small_run(i: int) -> int:
    noop(i)
    return os.getpid()


def b6_enqueue(url: str, schema: str, n: int) -> None:
    """Create the system database and put ``n`` small workflows on the queue."""
    launch(url, schema, listen=["stalwart-bench-none"])
    try:
        DBOS.register_queue(B6_QUEUE)
        for i in range(n):
            DBOS.enqueue_workflow(B6_QUEUE, small_run, i)
    finally:
        destroy()


def b6_worker(url: str, schema: str) -> None:
    print("ready", flush=True)
    sys.stdin.readline()
    launch(url, schema)
    DBOS.register_queue(B6_QUEUE)
    import signal
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    destroy()


def run_workflow(fn: Any, *args: Any) -> Any:
    """Call a workflow, sync or async, and return its result."""
    if asyncio.iscoroutinefunction(fn):
        return asyncio.run(fn(*args))
    return fn(*args)
