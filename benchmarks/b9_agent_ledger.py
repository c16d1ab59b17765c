"""B9: an agent loop of N turns, each tool result ~1 KB: what the ledger holds.

The loop is the README quickstart's (``ctx.call(model, observations=history,
options=[tool])`` until the model answers without a call), the model is
``stalwart.testing.ScriptedLLM`` (one tool call a turn, then an answer), the
tool returns ~1 KB of text. Measured: the bytes of the run's step rows (every
text column, spilled payloads included) against the content (the tool
results' JSON), the store's size on disk, and the time of the last turns
against the first ten (a turn is one model step and one tool step; the
median of ten turns each, timed inside the loop, live).

The peer is LangGraph's ``StateGraph`` of a model node and its ``ToolNode``
(the graph ``create_react_agent`` builds) with the same scripted replies, on
its SQLite checkpointer with ``durability="sync"``: its ledger bytes are its
checkpoint and write rows.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ._util import (
    Result,
    encrypted_store,
    pg_schema,
    pg_schema_bytes,
    pg_url_with,
    require,
    require_postgres,
    sqlite_bytes,
)

_WORDS = [
    "durable",
    "agents",
    "resume",
    "by",
    "replay",
    "without",
    "paying",
    "twice",
    "for",
    "a",
    "finished",
    "call",
]


def tool_text(i: int) -> str:
    """~1 KB of text, different for every call (not one repeated string)."""
    words = [_WORDS[(i * 7 + k * 3) % len(_WORDS)] for k in range(150)]
    return f"file-{i:05d}: " + " ".join(words)[:1000]


def _turn_ratio(turns: list[float]) -> dict[str, float]:
    first = statistics.median(turns[:10])
    last = statistics.median(turns[-10:])
    return {"turn_first_ms": first * 1e3, "turn_last_ms": last * 1e3, "turn_ratio": last / first}


# -- Stalwart ---------------------------------------------------------------------------

_ROW_BYTES = {
    "sqlite": "SELECT coalesce(sum(length(key) + length(name) + length(kind) + length(args_hash)"
    " + coalesce(length(args), 0) + coalesce(length(output), 0) + coalesce(length(error), 0)"
    " + 28), 0) FROM {t}steps",
    "postgres": "SELECT coalesce(sum(octet_length(key) + octet_length(name) + octet_length(kind)"
    " + octet_length(args_hash) + coalesce(octet_length(args), 0)"
    " + coalesce(octet_length(output), 0) + coalesce(octet_length(error), 0) + 28), 0)"
    " FROM {t}steps",
}
_PAYLOAD_BYTES = "SELECT coalesce(sum(length(data)), 0) FROM {t}payloads"


def _stalwart(url: str, n: int, encrypt: bool = False) -> tuple[dict[str, Any], int]:
    """Run the loop for ``n`` turns on ``url``: timings and the content's bytes."""
    import stalwart as sw
    from stalwart.testing import ScriptedLLM, call

    turns: list[float] = []
    content = 0

    @sw.policy
    async def read_file(path: str, i: int) -> str:
        """Read a file.

        Args:
            path: Which file.
            i: Its number.
        """
        nonlocal content
        text = tool_text(i)
        content += len(json.dumps(text))
        return text

    script = [call("read_file", path=f"f{i}.txt", i=i) for i in range(n)] + ["done"]
    model = ScriptedLLM(script)

    @sw.policy
    async def research(ctx: sw.Context, question: str) -> str:
        history = [sw.Message.system("Use tools to answer."), sw.Message.user(question)]
        while True:
            began = time.perf_counter()
            actions = await ctx.call(model, observations=history, options=[read_file])
            history += actions
            turns.append(time.perf_counter() - began)
            if not any(m.is_action_call for m in actions):
                return actions[-1].text

    async def main() -> float:
        async with sw.Runner(encrypted_store(url) if encrypt else url) as runner:
            start = time.perf_counter()
            assert await runner.run(research, question="read them", run_id="b9") == "done"
            return time.perf_counter() - start

    seconds = asyncio.run(main())
    return {"seconds": seconds, **_turn_ratio(turns[:-1] or turns)}, content


def _sqlite_row_bytes(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(_ROW_BYTES["sqlite"].format(t="")).fetchone()[0]
        return int(rows) + int(db.execute(_PAYLOAD_BYTES.format(t="")).fetchone()[0])
    finally:
        db.close()


def stalwart_sqlite(n: int = 100, encrypt: bool = False) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "b9.db"
        out, content = _stalwart(f"sqlite:///{db}", n, encrypt)
        ledger = _sqlite_row_bytes(db)
        disk = sqlite_bytes(db)
    return {
        **out,
        "ledger_bytes": ledger,
        "content_bytes": content,
        "ledger_x": ledger / content,
        "db_bytes": disk,
    }


def stalwart_postgres(n: int = 100, encrypt: bool = False) -> Result:
    require_postgres()
    import psycopg

    with pg_schema("b9") as schema:
        out, content = _stalwart(pg_url_with(schema=schema), n, encrypt)
        with psycopg.connect(pg_url_with(), autocommit=True) as conn:
            t = f'"{schema}".'
            ledger = int(conn.execute(_ROW_BYTES["postgres"].format(t=t)).fetchone()[0])
            ledger += int(
                conn.execute(
                    _PAYLOAD_BYTES.replace("length", "octet_length").format(t=t)
                ).fetchone()[0]
            )
        disk = pg_schema_bytes(schema)
    return {
        **out,
        "ledger_bytes": ledger,
        "content_bytes": content,
        "ledger_x": ledger / content,
        "db_bytes": disk,
    }


def stalwart_sqlite_encrypted(n: int = 100) -> Result:
    """Every value sealed with AES-256-GCM (stalwart.stores.encryption)."""
    return stalwart_sqlite(n, encrypt=True)


def stalwart_postgres_encrypted(n: int = 100) -> Result:
    """Every value sealed with AES-256-GCM (stalwart.stores.encryption)."""
    return stalwart_postgres(n, encrypt=True)


def stalwart_sqlite_10(n: int = 10) -> Result:
    return stalwart_sqlite(n)


def stalwart_sqlite_1000(n: int = 1000) -> Result:
    return stalwart_sqlite(n)


def stalwart_postgres_10(n: int = 10) -> Result:
    return stalwart_postgres(n)


def stalwart_postgres_1000(n: int = 1000) -> Result:
    return stalwart_postgres(n)


# -- LangGraph --------------------------------------------------------------------------


def langgraph_sqlite(n: int = 100) -> Result:
    """The same loop as a LangGraph model node + ToolNode graph, SqliteSaver."""
    require("langgraph", "langgraph.checkpoint.sqlite", "langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    content = 0
    turns: list[float] = []
    last = [time.perf_counter()]

    @tool
    def read_file(path: str, i: int) -> str:
        """Read a file."""
        nonlocal content
        text = tool_text(i)
        content += len(json.dumps(text))
        return text

    def model(state: MessagesState) -> dict[str, Any]:
        now = time.perf_counter()
        turn = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        if turn:
            turns.append(now - last[0])
        last[0] = now
        if turn >= n:
            return {"messages": [AIMessage("done")]}
        calls = [
            {"name": "read_file", "args": {"path": f"f{turn}.txt", "i": turn}, "id": f"call_{turn}"}
        ]
        return {"messages": [AIMessage("", tool_calls=calls)]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode([read_file]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lg.db"
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            app = g.compile(checkpointer=saver)
            start = time.perf_counter()
            out = app.invoke(
                {"messages": [SystemMessage("Use tools to answer."), HumanMessage("read them")]},
                {"configurable": {"thread_id": "b9"}, "recursion_limit": 2 * n + 10},
                durability="sync",
            )
            seconds = time.perf_counter() - start
            assert out["messages"][-1].content == "done"
            ledger = (
                conn.execute(
                    "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) "
                    "FROM checkpoints"
                ).fetchone()[0]
                + conn.execute("SELECT coalesce(sum(length(value)), 0) FROM writes").fetchone()[0]
            )
        finally:
            conn.close()
        disk = sqlite_bytes(path)
    return {
        "seconds": seconds,
        **_turn_ratio(turns),
        "ledger_bytes": int(ledger),
        "content_bytes": content,
        "ledger_x": ledger / content,
        "db_bytes": disk,
    }


def langgraph_sqlite_10(n: int = 10) -> Result:
    return langgraph_sqlite(n)
