"""LangGraph's side of the workloads: the graphs, and its checkpointers.

Imported only when ``langgraph`` is installed. Durable runs use
``durability="sync"`` (a step's checkpoint is written before the next step
starts), with LangGraph's SQLite and PostgreSQL checkpointers as their docs
set them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send


class LoopState(TypedDict):
    i: int
    n: int


class CountedState(TypedDict):
    i: int
    n: int
    counter: str


class FanState(TypedDict):
    n: int
    results: Annotated[list[int], operator.add]


class Item(TypedDict):
    i: int


def _step(s: LoopState) -> dict[str, int]:
    return {"i": s["i"] + 1}


def _again(s: LoopState | CountedState) -> str:
    return "step" if s["i"] < s["n"] else END


def loop_graph() -> StateGraph:
    """One node looping on itself ``n`` times: ``n`` sequential steps."""
    g = StateGraph(LoopState)
    g.add_node("step", _step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", _again, ["step", END])
    return g


FIRST_LIVE: list[float] = []


def _counted(s: CountedState) -> dict[str, int]:
    if not FIRST_LIVE:
        FIRST_LIVE.append(time.perf_counter())
    i = s["i"]
    with open(s["counter"], "a") as f:
        f.write(f"{i}\n")
    print(f"done {i}", flush=True)
    return {"i": i + 1}


def counted_graph() -> StateGraph:
    g = StateGraph(CountedState)
    g.add_node("step", _counted)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", _again, ["step", END])
    return g


def _fan(s: FanState) -> list[Send]:
    return [Send("io", {"i": i}) for i in range(s["n"])]


async def _io(s: Item) -> dict[str, list[int]]:
    await asyncio.sleep(0.01)
    return {"results": [s["i"]]}


def fan_graph() -> StateGraph:
    """``n`` concurrent branches through ``Send``, each awaiting 10 ms."""
    g = StateGraph(FanState)
    g.add_node("io", _io)
    g.add_conditional_edges(START, _fan, ["io"])
    g.add_edge("io", END)
    return g


def config(n: int, thread: str = "bench") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": n + 10}


def pg_conninfo(url: str, schema: str) -> str:
    """The URL with the schema as search path, where the checkpointer's tables go."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@contextlib.contextmanager
def saver(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """A synchronous checkpointer: ``sqlite:///path`` or a PostgreSQL conninfo."""
    if url.startswith("sqlite:///"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False)
        try:
            s = SqliteSaver(conn)
            s.setup()
            yield s
        finally:
            conn.close()
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as s:
        s.setup()
        yield s


@contextlib.asynccontextmanager
async def async_saver(url: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if url.startswith("sqlite:///"):
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(url.removeprefix("sqlite:///")) as s:
            await s.setup()
            yield s
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(url) as s:
        await s.setup()
        yield s


def b5_main(url: str, counter: str, action: str, n: int) -> None:
    start = time.perf_counter()
    with saver(url) as s:
        app = counted_graph().compile(checkpointer=s)
        cfg = config(n, "b5")
        if action == "run":
            app.invoke({"i": 0, "n": n, "counter": counter}, cfg, durability="sync")
            return
        out = app.invoke(None, cfg, durability="sync")  # resume from the last checkpoint
        assert out["i"] == n, out
        print(f"recovered_in {time.perf_counter() - start}", flush=True)
        print(f"first_live_in {(FIRST_LIVE or [time.perf_counter()])[0] - start}", flush=True)
