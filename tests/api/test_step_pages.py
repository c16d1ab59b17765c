"""``GET /runs/{run_id}/steps`` pages a run's steps as ``GET /runs`` pages
runs: ``limit`` and an opaque ``cursor``, the page's ``next`` leading on,
oldest first, so a client reads a long run a page at a time and a client
following a run asks for what came after what it has."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from tests.api.api_app import stepper

import stalwart as sw
from stalwart.api import create_app


@sw.policy
async def tick(i: int) -> int:
    return i


@sw.policy
async def tally(n: int) -> int:
    """``n`` steps, one after the other."""
    total = 0
    for i in range(n):
        total += await tick(i)
    return total


@pytest.fixture
async def api(store_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """A client of an API executing runs in process, and its runner."""
    app = create_app(store_url, [tally, stepper], execute=True)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c, app.state.api.runner


async def _pages(c: httpx.AsyncClient, run_id: str, **query: Any) -> list[dict[str, Any]]:
    """Every page of the run's steps, following ``next`` from the first."""
    pages: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {**query, **({"cursor": cursor} if cursor else {})}
        r = await c.get(f"/runs/{run_id}/steps", params=params)
        assert r.status_code == 200, r.text
        pages.append(r.json())
        cursor = pages[-1]["next"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "next never ends"


async def _echoed(runner: Any, run_id: str, n: int) -> None:
    """Wait until ``stepper`` has echoed ``n`` times and stands still again."""
    for _ in range(500):
        echoes = [s for s in await runner.steps(run_id) if s.name == "echo"]
        if len(echoes) >= n and (await runner.get_run(run_id)).status != "running":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"run {run_id} never echoed {n} times")


async def test_following_next_gives_every_step_once_in_the_order_they_finished(
    api: tuple[httpx.AsyncClient, Any],
) -> None:
    c, runner = api
    assert await runner.run(tally, 23, run_id="long/run") == sum(range(23))
    recorded = await runner.steps("long/run")
    pages = await _pages(c, "long%2Frun", limit=5)
    keys = [s["key"] for p in pages for s in p["steps"]]
    assert keys == [s.key for s in recorded]  # each once, oldest first, none missed
    assert [len(p["steps"]) for p in pages] == [5, 5, 5, 5, 3]
    assert {p["step_count"] for p in pages} == {23}
    assert [p["earlier"] for p in pages] == [0, 5, 10, 15, 20]
    assert [p["later"] for p in pages] == [18, 13, 8, 3, 0]
    whole = await c.get("/runs/long%2Frun/steps", params={"limit": 500})
    assert whole.json()["next"] is None and len(whole.json()["steps"]) == 23


async def test_limit_bounds_a_page_and_fifty_is_the_default(
    api: tuple[httpx.AsyncClient, Any],
) -> None:
    c, runner = api
    await runner.run(tally, 60, run_id="sixty")
    first = (await c.get("/runs/sixty/steps")).json()
    assert len(first["steps"]) == 50 and first["next"] is not None
    assert first["step_count"] == 60 and first["later"] == 10
    seven = (await c.get("/runs/sixty/steps", params={"limit": 7})).json()
    assert [s["key"] for s in seven["steps"]] == [s["key"] for s in first["steps"][:7]]
    after = (await c.get("/runs/sixty/steps", params={"cursor": first["next"]})).json()
    assert len(after["steps"]) == 10 and after["next"] is None and after["earlier"] == 50


async def test_a_client_following_a_run_asks_again_with_the_cursor_of_its_last_page(
    api: tuple[httpx.AsyncClient, Any],
) -> None:
    """The last page's ``next`` is null; the cursor that got that page, asked
    again, gives the steps recorded since after the ones the client has."""
    c, runner = api
    await runner.start(stepper, 3, run_id="followed")
    seen: list[str] = []
    cursor = None
    for i in range(3):
        await runner.signal("followed", "go")
        await _echoed(runner, "followed", i + 1)
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await c.get("/runs/followed/steps", params=query)).json()
        while True:
            seen += [s["key"] for s in page["steps"] if s["key"] not in seen]
            if page["next"] is None:
                break
            cursor = page["next"]
            page = (
                await c.get("/runs/followed/steps", params={"limit": 2, "cursor": cursor})
            ).json()
    assert seen == [s.key for s in await runner.steps("followed")]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=", "limit"),  # given empty is not "the default"
        ("cursor=", "cursor"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=-1", "limit"),
        ("limit=2.5", "limit"),
        ("limit=true", "limit"),
        ("limit=%2B5", "limit"),  # +5: Python's int() reads it, JSON does not
        ("limit=99999999999999999999999", "limit"),
        ("cursor=nan_MQ%3D%3D", "cursor"),
        ("cursor=inf_MQ%3D%3D", "cursor"),
        ("cursor=1.5_%21%21", "cursor"),  # not base64url
        ("cursor=MQ%3D%3D", "cursor"),  # no time
        ("cursor=1.5_MQ", "cursor"),  # unpadded
        ("cursor=1e400_MQ%3D%3D", "cursor"),  # past a float
    ],
)
async def test_a_bad_limit_or_cursor_is_a_422_naming_it(
    api: tuple[httpx.AsyncClient, Any], query: str, field: str
) -> None:
    c, runner = api
    await runner.run(tally, 1, run_id="one")
    for run_id in ("one", "no-such-run"):  # the request is checked before the run is read
        r = await c.get(f"/runs/{run_id}/steps?{query}")
        assert r.status_code == 422, r.text
        assert [f["field"] for f in r.json()["fields"]] == [field], r.text


async def test_a_well_formed_cursor_no_page_gave_is_a_position(
    api: tuple[httpx.AsyncClient, Any],
) -> None:
    """Any text of the cursor's form is a place among the steps, as for
    ``GET /runs``: one past the last step is an empty last page."""
    c, runner = api
    await runner.run(tally, 2, run_id="two")
    for cursor in ("1e+99_MQ==", "0_AA==", "-1_____"):
        r = await c.get("/runs/two/steps", params={"cursor": cursor})
        assert r.status_code == 200, (cursor, r.text)
    late = (await c.get("/runs/two/steps", params={"cursor": "1e+99_MQ=="})).json()
    assert late == {"steps": [], "step_count": 2, "earlier": 2, "later": 0, "next": None}
    early = (await c.get("/runs/two/steps", params={"cursor": "0_AA=="})).json()
    assert len(early["steps"]) == 2 and early["earlier"] == 0


async def test_the_steps_of_a_run_that_does_not_exist_are_a_404(
    api: tuple[httpx.AsyncClient, Any],
) -> None:
    c, _ = api
    for query in ("", "?limit=3", "?cursor=1.5_MQ%3D%3D"):
        r = await c.get(f"/runs/nobody/steps{query}")
        assert r.status_code == 404, r.text
        assert "nobody" in r.json()["error"]
