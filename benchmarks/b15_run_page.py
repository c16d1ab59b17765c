"""B15: the inspector's page of a 1,000-step run.

The run is an agent of 500 turns: each a model reply asking for one tool
call, and the tool's result (1,000 steps, then the answer); a model step's
record holds the conversation so far, 1,000 messages by the end. Measured:
milliseconds to answer ``GET /run?id=…`` through the inspector's ASGI app
(httpx's ASGI transport, in process, so no network), the whole page a
browser gets (the latest 50 steps, the conversation, the timeline, token
usage). The floor is the store's own reads for that page: the run's row and
its latest 50 steps (``Store.step_page``). Recording the run is set-up, not
timed. The machines are shared: the process's CPU time per page is
reported beside the wall time (on PostgreSQL the server's share is not in
it).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import httpx

import stalwart as sw
from stalwart import llm
from stalwart.testing import ScriptedLLM, call
from stalwart.web import create_app

from ._util import Result, pg_schema, pg_url_with, require_postgres

#: Turns of the agent at full size (two steps each); the smoke run takes fewer.
TURNS = 500
RUN_ID = "b15-agent"


@sw.policy(name="b15_lookup")
async def b15_lookup(page: int) -> str:
    """A page of results.

    Args:
        page: The page number.
    """
    return f"page {page}: " + "result text " * 8


def _agent(turns: int) -> llm.Agent:
    async def turn(observations: list[sw.Message], options: object) -> sw.Message | str:
        asked = sum(1 for m in observations if m.role == "assistant")
        return call("b15_lookup", page=asked) if asked < turns else "done"

    model = ScriptedLLM([turn] * (turns + 1), name="b15_model")
    return llm.Agent(model, instructions="Read every page.", tools=[b15_lookup], name="b15_agent",
                     max_rounds=turns + 2)  # fmt: skip


def _turns(n: int) -> int:
    return TURNS if n >= 5 else 10  # the smoke size records a short run


async def _record(url: str, turns: int) -> None:
    agent = _agent(turns)
    async with sw.Runner(url, policies=[agent]) as runner:
        await runner.run(agent, "Read them all.", run_id=RUN_ID)


async def _pages(url: str, n: int) -> tuple[float, float]:
    app = create_app(url, hosts=("127.0.0.1",))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            await c.get("/run", params={"id": RUN_ID})  # templates compiled, connections open
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(n):
                r = await c.get("/run", params={"id": RUN_ID})
                assert r.status_code == 200 and "Timeline" in r.text, r.status_code
            return time.perf_counter() - start, time.process_time() - cpu


async def _reads(url: str, n: int) -> tuple[float, float]:
    async with sw.Runner(url, serving=False) as runner:
        store = runner.store
        await store.step_page(RUN_ID, 50)
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            run = await store.get_run(RUN_ID)
            page = await store.step_page(RUN_ID, 50)
            assert run is not None and page.steps
        return time.perf_counter() - start, time.process_time() - cpu


def _b15(url: str, n: int, page: bool) -> Result:
    async def main() -> tuple[float, float]:
        await _record(url, _turns(n))
        return await (_pages(url, n) if page else _reads(url, n))

    seconds, cpu = asyncio.run(main())
    return {
        "seconds": seconds,
        "ms_per_page": 1000 * seconds / n,
        "cpu_ms_per_page": 1000 * cpu / n,
        "steps": 2 * _turns(n) + 1,
    }


def b15_floor_sqlite(n: int = 20) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b15(f"sqlite:///{Path(tmp) / 'b15.db'}", n, page=False)


def b15_stalwart_sqlite(n: int = 20) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return _b15(f"sqlite:///{Path(tmp) / 'b15.db'}", n, page=True)


def b15_stalwart_postgres(n: int = 20) -> Result:
    require_postgres()
    with pg_schema("sw") as schema:
        return _b15(pg_url_with(schema=schema), n, page=True)
