"""Tags over the HTTP API: given in a start's body, shown on the run, and
filtered by with ``GET /runs?tag=key:value`` (repeatable); bad ones are a
422 naming the field. In process over ASGI, on a real SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

import stalwart as sw
from stalwart.api import create_app

TOKEN = "api-tags-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@sw.policy
async def tagged_greet(name: str) -> str:
    """Greet someone."""
    return f"hello {name}"


@asynccontextmanager
async def _client(url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(url, [tagged_greet], tokens=[TOKEN])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=AUTH
        ) as c:
            yield c


async def _start(c: httpx.AsyncClient, run_id: str, tags: object) -> httpx.Response:
    body = {"inputs": {"name": "Ada"}, "run_id": run_id, "tags": tags}
    return await c.post("/policies/tagged_greet/runs", json=body)


async def test_a_start_keeps_its_tags_and_the_listing_filters_by_them(sqlite_url: str) -> None:
    async with _client(sqlite_url) as c:
        r = await _start(c, "a", {"customer": "c-42", "tier": "gold"})
        assert r.status_code == 201, r.text
        assert r.json()["tags"] == {"customer": "c-42", "tier": "gold"}
        assert (await _start(c, "b", {"customer": "c-42"})).status_code == 201
        assert (await _start(c, "c", None)).status_code == 201

        async def ids(*tags: str) -> list[str]:
            r = await c.get("/runs", params=[("tag", t) for t in tags])
            assert r.status_code == 200, r.text
            return [run["id"] for run in r.json()["runs"]]

        assert await ids("customer:c-42") == ["b", "a"]
        assert await ids("customer:c-42", "tier:gold") == ["a"]
        assert await ids("customer:c-42", "customer:c-7") == []  # one key, two values
        assert await ids() == ["c", "b", "a"]
        assert (await c.get("/runs/c")).json()["tags"] == {}


async def test_bad_tags_are_a_422_naming_the_field_and_start_nothing(sqlite_url: str) -> None:
    async with _client(sqlite_url) as c:
        for tags in ({"bad key": "v"}, {"k": ""}, {"k": "a\nb"}, {"k": 1}, ["k"]):
            r = await _start(c, "x", tags)
            assert r.status_code == 422, (tags, r.text)
            assert r.json()["fields"][0]["field"].startswith("tags"), r.text
        for query in ("customer", "bad key:v", "k:", "tag"):
            r = await c.get("/runs", params={"tag": query})
            assert r.status_code == 422, (query, r.text)
            assert r.json()["fields"][0]["field"] == "tag"
        assert (await c.get("/runs")).json()["runs"] == []


async def test_the_document_describes_tags_where_the_server_takes_them(sqlite_url: str) -> None:
    async with _client(sqlite_url) as c:
        doc = (await c.get("/openapi.json")).json()
    tags = doc["components"]["schemas"]["Tags"]
    assert tags["maxProperties"] == 16
    listing = {p["name"]: p for p in doc["paths"]["/runs"]["get"]["parameters"]}
    assert listing["tag"]["schema"]["type"] == "array" and listing["tag"]["explode"] is True
    body = doc["paths"]["/policies/tagged_greet/runs"]["post"]["requestBody"]
    start = body["content"]["application/json"]["schema"]["properties"]["tags"]
    assert {"$ref": "#/components/schemas/Tags"} in start["anyOf"]
