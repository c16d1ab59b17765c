"""The HTTP API (``stalwart.api``) at its bounds.

The application is driven in process over ASGI (httpx's transport), on a
real SQLite file, the way docs/api.md shows it ("mount it in your own, or
test it in process"):

- mounted under a prefix in a larger application (``Mount("/api", ...)``)
  with public static files, the API still needs its token for every API
  path, GETs included;
- a start whose numbers pass the JSON parser but not the store (a delay of
  ``1e400`` is infinity, a priority past a 32-bit integer) is a 422 that
  records nothing, not a 500 or a 503; and a run recorded from Python with
  an infinite delay does not break the listing for everyone;
- a stream of a run executing in the server, whose client stopped reading,
  keeps a bounded number of live events for it, and still ends with the
  run's outcome.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Mount

import stalwart as sw
from stalwart.api import Cursor, create_app
from stalwart.api.events import LIVE_BUFFER, run_events

TOKEN = "api-bounds-token-0123456"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@sw.policy
async def bounds_greet(name: str) -> str:
    """Greet someone."""
    return f"hello {name}"


@sw.policy
async def bounds_chatty(ctx: sw.Context, n: int) -> int:
    """Wait for ``go``, then emit ``n`` live values (a model streaming tokens)."""
    await ctx.wait_for("go")
    for i in range(n):
        ctx.emit(i)
    return n


async def _with(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c


def test_a_mounted_api_with_static_files_needs_a_token_for_every_api_path(
    tmp_path: Path, sqlite_url: str
) -> None:
    static = tmp_path / "site"
    static.mkdir()
    (static / "index.html").write_text("<p>the app's own page</p>")
    api = create_app(sqlite_url, [bounds_greet], tokens=[TOKEN], static=static)
    outer = Starlette(routes=[Mount("/api", app=api)])

    async def go() -> None:
        async with api.router.lifespan_context(api):
            transport = httpx.ASGITransport(app=outer)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                made = await c.post(
                    "/api/policies/bounds_greet/runs",
                    json={"inputs": {"name": "Ada"}, "run_id": "secret-run"},
                    headers=AUTH,
                )
                assert made.status_code == 201, made.text
                for path in ("/runs", "/runs/secret-run", "/runs/secret-run/steps",
                             "/policies", "/openapi.json"):  # fmt: skip
                    anon = await c.get(f"/api{path}")
                    assert anon.status_code == 401, (path, anon.text)
                    assert "secret-run" not in anon.text
                    assert (await c.get(f"/api{path}", headers=AUTH)).status_code == 200
                page = await c.get("/api/")  # the static page stays public
                assert page.status_code == 200 and "own page" in page.text

    asyncio.run(go())


def test_numbers_the_store_cannot_hold_are_a_422_and_record_nothing(sqlite_url: str) -> None:
    app = create_app(sqlite_url, [bounds_greet], tokens=[TOKEN])
    bodies = {
        "delay": '{"inputs": {"name": "a"}, "run_id": "r-delay", "delay": 1e400}',
        "priority": '{"inputs": {"name": "a"}, "run_id": "r-prio", "priority": 2147483648}',
    }

    async def go() -> None:
        async for c in _with(app):
            for field, body in bodies.items():
                r = await c.post(
                    "/policies/bounds_greet/runs",
                    content=body,
                    headers={**AUTH, "Content-Type": "application/json"},
                )
                assert r.status_code == 422, (field, r.status_code, r.text)
                assert [f["field"] for f in r.json()["fields"]] == [field]
            listing = await c.get("/runs", headers=AUTH)
            assert listing.status_code == 200 and listing.json()["runs"] == []

    asyncio.run(go())


def test_a_run_with_an_endless_delay_does_not_break_the_listing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'api.db'}"

    async def go() -> None:
        async with sw.Runner(url, policies=[bounds_greet]) as runner:  # from Python, not HTTP
            await runner.enqueue(bounds_greet, "Ada", run_id="never", delay=3600)
            await runner.enqueue(bounds_greet, "Bob", run_id="soon")
        # enqueue refuses an endless delay now; a row from an older version,
        # or edited by hand, can still hold one.
        with sqlite3.connect(tmp_path / "api.db") as db:
            db.execute("UPDATE runs SET wake_at = 9e999 WHERE id = 'never'")
        app = create_app(url, [bounds_greet], tokens=[TOKEN])
        async for c in _with(app):
            listing = await c.get("/runs", headers=AUTH)
            assert listing.status_code == 200, listing.text
            assert {r["id"] for r in listing.json()["runs"]} == {"never", "soon"}
            one = await c.get("/runs/never", headers=AUTH)
            assert one.status_code == 200, one.text
            assert one.json()["status"] == "pending"
            async with sw.Runner(url, policies=[bounds_greet]) as runner:  # its stream starts too
                rec = await runner.get_run("never")
                frames = run_events(
                    runner, rec, Cursor(), poll=0.05, live=False, find_policy=lambda _: bounds_greet
                )
                first = await anext(frames)
                await frames.aclose()
                assert first.startswith("id: 0\nevent: status\n") and '"wake_at":null' in first

    asyncio.run(go())


def test_a_stalled_stream_keeps_a_bounded_number_of_live_events(sqlite_url: str) -> None:
    n = LIVE_BUFFER * 3

    async def go() -> tuple[int, list[str], Any]:
        url = sqlite_url
        async with sw.Runner(url, policies=[bounds_chatty], serving=True) as runner:
            handle = await runner.start(bounds_chatty, n, run_id="chatty")
            first = await runner.get_run("chatty")
            frames = run_events(
                runner, first, Cursor(), poll=0.05, live=True, find_policy=lambda _: bounds_chatty
            )
            got = [await anext(frames)]  # the client reads one event, then stalls
            while (await runner.get_run("chatty")).status != "suspended":
                await asyncio.sleep(0.01)
            await runner.signal("chatty", "go")
            result = await asyncio.wait_for(handle.result(), 30)  # emitted all n meanwhile
            got += [text async for text in frames]  # the client reads again
            emits = sum(1 for text in got if text.startswith("event: emit"))
            return emits, got, result

    emits, got, result = asyncio.run(go())
    assert result == n
    assert 0 < emits <= LIVE_BUFFER  # not all n kept for a client that did not read
    assert got[-1].startswith("id: ") and "event: end" in got[-1] and '"succeeded"' in got[-1]
