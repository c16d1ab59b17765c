"""The API guard's token, host and origin checks, the ones it shares with
the inspector (``stalwart.http.access``), on the guard alone (in process)."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from stalwart.api.security import Guard

from .conftest import OTHER_TOKEN, TOKEN


async def _runs(request: Request) -> JSONResponse:
    return JSONResponse({"runs": []})


def _client(tokens: list[str], hosts: tuple[str, ...] | None) -> httpx.AsyncClient:
    app = Guard(Starlette(routes=[Route("/runs", _runs, methods=["GET", "POST"])]), tokens, hosts)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def test_a_malformed_origin_is_refused_not_an_error() -> None:
    """An ``Origin`` no URL parser reads is not this server: 403, like any other."""
    async with _client([], ("127.0.0.1",)) as c:
        broken = await c.post("/runs", json={}, headers={"origin": "http://[::1"})
        ok = await c.post("/runs", json={}, headers={"origin": "http://127.0.0.1"})
    assert broken.status_code == 403, broken.text
    assert "are not accepted here" in broken.json()["error"]
    assert ok.status_code == 200


async def test_a_malformed_host_is_refused() -> None:
    async with _client([], ("127.0.0.1", "localhost")) as c:
        broken = await c.get("/runs", headers={"host": "[::1"})
    assert broken.status_code == 421
    assert broken.json()["error"] == "this API answers to 127.0.0.1, localhost only"


async def test_each_token_is_accepted_and_nothing_near_one() -> None:
    async with _client([TOKEN, OTHER_TOKEN], None) as c:
        accepted = [
            await c.get("/runs", headers={"authorization": f"Bearer {TOKEN}"}),
            await c.get("/runs", headers={"authorization": f"bearer  {OTHER_TOKEN} "}),
        ]
        refused = [
            await c.get("/runs"),
            await c.get("/runs", headers={"authorization": f"Bearer {TOKEN}x"}),
            await c.get("/runs", headers={"authorization": f"Bearer {TOKEN[:-1]}"}),
            await c.get("/runs", headers={"authorization": f"Basic {TOKEN}"}),
            await c.get("/runs", headers={"authorization": "Bearer"}),
        ]
    assert [r.status_code for r in accepted] == [200, 200]
    assert [r.status_code for r in refused] == [401] * len(refused)
    assert all(TOKEN not in r.text and OTHER_TOKEN not in r.text for r in refused)
