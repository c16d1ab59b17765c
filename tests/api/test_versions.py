"""Versions over the HTTP API: listed with their live workers, made latest
or retired by POST, and a run says its code version and why it is stranded.
In process over ASGI, on a real SQLite file."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

import stalwart as sw
from stalwart.api import create_app

TOKEN = "api-versions-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@sw.policy
async def waits(ctx: sw.Context) -> str:
    """Wait for a go."""
    return str(await ctx.wait_for("go"))


@asynccontextmanager
async def _client(url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(url, [waits], tokens=[TOKEN])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=AUTH
        ) as c:
            yield c


async def test_versions_are_listed_made_latest_retired_and_strand_runs(sqlite_url: str) -> None:
    async with sw.Runner(
        sqlite_url, policies=[waits], code_version="v1", serving=True, poll_interval=0.02
    ) as v1:
        await v1.enqueue(waits, run_id="w")
        deadline = time.monotonic() + 20
        while (await v1.get_run("w")).status != "suspended":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        async with _client(sqlite_url) as c:
            listed = (await c.get("/versions")).json()["versions"]
            assert [(v["version"], v["latest"], v["retired"]) for v in listed] == [
                ("v1", False, False)
            ]
            assert listed[0]["live_workers"] == [v1.owner]
            run = (await c.get("/runs/w")).json()
            assert (run["code_version"], run["stranded"]) == ("v1", None)

            r = await c.post("/versions/v2/latest")
            assert r.status_code == 200, r.text
            assert {v["version"]: v["latest"] for v in r.json()["versions"]} == {
                "v1": False,
                "v2": True,
            }
            r = await c.post("/versions/v1/retire")
            assert r.status_code == 200, r.text
            stranded = (await c.get("/runs/w")).json()["stranded"]
            assert stranded is not None and "retired version v1" in stranded
            page = (await c.get("/runs")).json()["runs"]
            assert [run["stranded"] is not None for run in page] == [True]


async def test_a_version_with_a_space_or_a_control_is_a_422(sqlite_url: str) -> None:
    async with _client(sqlite_url) as c:
        for bad in ("two%20words", "tab%09here", "%00"):
            r = await c.post(f"/versions/{bad}/retire")
            assert r.status_code == 422, (bad, r.text)
            assert r.json()["fields"][0]["field"] == "version"
        assert (await c.get("/versions")).json() == {"versions": []}


async def test_versions_need_the_token(sqlite_url: str) -> None:
    async with _client(sqlite_url) as c:
        r = await c.post("/versions/v2/latest", headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401
