"""Actions: approve, reject, a JSON payload and cancel, sent as a browser
would (a POST carrying the CSRF cookie's value), and carried out by a worker
(a Runner serving in this process), never by the web app."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator

import httpx
import pytest

import stalwart as sw
from stalwart.stores import open_store

from .conftest import client
from .web_app import HOSTILE, POLICIES, hostile_wait, ship


async def suspended(url: str, target: object, *args: object, run_id: str) -> None:
    """Start a run and leave it suspended, waiting for its signal."""
    async with sw.Runner(url, policies=POLICIES) as r:
        await r.start(target, *args, run_id=run_id)
        for _ in range(300):
            if (await r.get_run(run_id)).status == "suspended":
                return
            await asyncio.sleep(0.01)
    raise AssertionError(f"{run_id} never suspended")


@contextlib.asynccontextmanager
async def serving(url: str) -> AsyncIterator[None]:
    stop = asyncio.Event()
    runner = sw.Runner(url, policies=POLICIES, poll_interval=0.05)
    task = asyncio.create_task(runner.serve(stop))
    try:
        yield
    finally:
        stop.set()
        await task


async def outcome(url: str, run_id: str, timeout: float = 10.0) -> tuple[str, str | None]:
    store = open_store(url)
    assert store is not None
    await store.open()
    try:
        async with asyncio.timeout(timeout):
            while True:
                run = await store.get_run(run_id)
                assert run is not None
                if run.status in ("succeeded", "failed", "cancelled"):
                    return run.status, run.result
                await asyncio.sleep(0.03)
    finally:
        await store.close()


async def csrf_of(c: httpx.AsyncClient, page: str) -> str:
    body = (await c.get(page)).text
    found = re.search(r'name="csrf" value="([^"]+)"', body)
    assert found, "the page has no action form"
    return found.group(1)


@pytest.mark.parametrize(("verdict", "result"), [("approve", "shipped"), ("reject", "kept")])
async def test_approve_or_reject_resumes_the_run_on_a_worker(
    sqlite_url: str, verdict: str, result: str
) -> None:
    url = sqlite_url
    await suspended(url, ship, "the parcel", run_id="ship-1")
    async with client(url) as c, serving(url):
        token = await csrf_of(c, "/waiting")
        form = {"csrf": token, "id": "ship-1", "name": "approve", "verdict": verdict}
        sent = await c.post("/run/signal", data={**form, "back": "/waiting"})
        assert sent.status_code == 303
        assert sent.headers["location"] == "/waiting?answered=ship-1&signal=approve"
        assert await outcome(url, "ship-1") == ("succeeded", f'"{result} the parcel"')


async def test_a_json_payload_reaches_the_run(sqlite_url: str) -> None:
    url = sqlite_url
    await suspended(url, hostile_wait, run_id="w")
    async with client(url) as c, serving(url):
        token = await csrf_of(c, "/run?id=w")
        bad = await c.post(
            "/run/signal",
            data={"csrf": token, "id": "w", "name": HOSTILE, "payload": "{nope", "verdict": "send"},
        )
        assert bad.status_code == 400 and "not JSON" in bad.text
        assert (await c.get("/run", params={"id": "w"})).text.count("s-suspended") == 1
        sent = await c.post(
            "/run/signal",
            data={"csrf": token, "id": "w", "name": HOSTILE, "payload": '{"n": [1, 2]}'},
        )
        assert sent.status_code == 303
        assert sent.headers["location"].startswith("/run?id=w&answered=w&signal=")
        assert await outcome(url, "w") == ("succeeded", "\"{'n': [1, 2]}\"")


async def test_cancel_stops_a_waiting_run_and_finished_runs_refuse_actions(
    sqlite_url: str,
) -> None:
    url = sqlite_url
    await suspended(url, ship, "x", run_id="ship-1")
    async with client(url) as c:
        token = await csrf_of(c, "/run?id=ship-1")
        cancelled = await c.post("/run/cancel", data={"csrf": token, "id": "ship-1"})
        assert cancelled.status_code == 303
        assert await outcome(url, "ship-1") == ("cancelled", None)
        again = await c.post(
            "/run/signal",
            data={"csrf": token, "id": "ship-1", "name": "approve", "verdict": "approve"},
        )
        missing = await c.post("/run/cancel", data={"csrf": token, "id": "nobody"})
        page = (await c.get("/run", params={"id": "ship-1"})).text
    assert again.status_code == 409 and "has finished (cancelled)" in again.text
    assert missing.status_code == 404
    assert "/run/cancel" not in page and "/run/signal" not in page  # no actions offered


async def test_the_web_app_never_executes_a_run(sqlite_url: str) -> None:
    """Approved with no worker serving, the run stays waiting to be resumed:
    the inspector signals, it does not execute."""
    url = sqlite_url
    await suspended(url, ship, "x", run_id="ship-1")
    async with client(url) as c:
        token = await csrf_of(c, "/waiting")
        data = {"csrf": token, "id": "ship-1", "name": "approve", "verdict": "approve"}
        assert (await c.post("/run/signal", data=data)).status_code == 303
        await asyncio.sleep(0.5)
        page = (await c.get("/run", params={"id": "ship-1"})).text
    assert "s-succeeded" not in page and "s-running" not in page
    assert re.search(r'class="status s-(pending|suspended)"', page)
