"""A run that sleeps or waits a very long time is ordinary; showing it must not crash.

``ctx.sleep(1e12)`` (a "never, unless woken" sleep) and ``wait_for(...,
timeout=1e12)`` are accepted by the engine and recorded as a ``wake_at``
some 31,000 years away. The inspector and the CLI then turn that timestamp
into a calendar date with ``datetime.fromtimestamp``, which raises for a
year past 9999: the run's page, the "waiting for a human" page and every
CLI table that lists the run answer with a 500 or a traceback.
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx

import stalwart as sw
from stalwart.web import create_app

FAR = 1e12  # seconds: about 31,700 years


@sw.policy
async def napper(ctx: sw.Context) -> str:
    await ctx.sleep(FAR)
    return "woke"


@sw.policy
async def asker(ctx: sw.Context) -> str:
    return str(await ctx.wait_for("approve", timeout=FAR))


async def _suspend_both(url: str) -> None:
    async with sw.Runner(url, policies=[napper, asker]) as r:
        await r.start(napper, run_id="nap")
        await r.start(asker, run_id="ask")
        for _ in range(200):
            runs = {x.id: x.status for x in await r.list_runs(limit=10)}
            if runs == {"nap": "suspended", "ask": "suspended"}:
                return
            await asyncio.sleep(0.02)
    raise AssertionError(f"the runs did not suspend: {runs}")


async def test_inspector_shows_a_run_that_sleeps_for_ages(sqlite_url: str) -> None:
    url = sqlite_url
    await _suspend_both(url)
    app = create_app(url, hosts=("127.0.0.1",))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            pages = ("/run?id=nap", "/run?id=ask", "/waiting")
            codes = {p: (await c.get(p)).status_code for p in pages}
    assert codes == {"/run?id=nap": 200, "/run?id=ask": 200, "/waiting": 200}


async def test_cli_tables_list_a_run_that_sleeps_for_ages(sqlite_url: str) -> None:
    url = sqlite_url
    await _suspend_both(url)
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    for args in (["runs", "list"], ["runs", "show", "nap"], ["runs", "waiting"]):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "stalwart.cli", *args, "--store", url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
        )  # fmt: skip
        raw, _ = await asyncio.wait_for(proc.communicate(), 60)
        out = raw.decode()
        assert proc.returncode == 0, f"stalwart {' '.join(args)} failed:\n{out[-600:]}"
        assert "Traceback" not in out and "out of range" not in out
