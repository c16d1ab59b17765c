"""The inspector's run page: a run's code version, what it is cleared for,
which live workers can take it, and why it is stranded; all escaped."""

from __future__ import annotations

import asyncio
import time

import stalwart as sw
from stalwart.stores import open_store
from stalwart.stores.versions import WorkerRecord

from .conftest import client
from .test_pages import texts

HOSTILE = "<b>v9</b>"


@sw.policy
async def waits(ctx: sw.Context) -> str:
    return str(await ctx.wait_for("go"))


async def _seed(url: str) -> None:
    async with sw.Runner(
        url, policies=[waits], code_version="v1", serving=True, poll_interval=0.02
    ) as v1:
        for run_id in ("left", "moved"):
            await v1.enqueue(waits, run_id=run_id)
        deadline = time.monotonic() + 20
        while {(await v1.get_run(i)).status for i in ("left", "moved")} != {"suspended"}:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
    store = open_store(url)
    await store.open()
    try:
        now = time.time()
        await store.beat_worker(
            WorkerRecord("host:1:<i>w</i>", HOSTILE, {"waits": HOSTILE}, None, 600, now, now)
        )
        await store.retire_version("v1")
        await store.pin_run("moved", HOSTILE)
        await store.clear_run("left", ["v3"])
    finally:
        await store.close()


async def test_the_run_page_shows_versions_takers_and_why_a_run_is_stranded(
    sqlite_url: str,
) -> None:
    await _seed(sqlite_url)
    async with client(sqlite_url) as c:
        left = (await c.get("/run", params={"id": "left"})).text
        moved = (await c.get("/run", params={"id": "moved"})).text
    shown = texts(left)
    assert "code version v1" in shown
    assert "cleared for v3" in shown
    assert "live workers that can take it none" in shown
    assert "stranded its code version v1 of 'waits' is served only by retired version v1" in shown
    shown = texts(moved)
    assert f"code version {HOSTILE}" in shown
    assert f"live workers that can take it host:1:<i>w</i> (version {HOSTILE})" in shown
    assert "stranded" not in shown
    assert "<b>v9</b>" not in moved and "<i>w</i>" not in moved  # escaped, never markup
