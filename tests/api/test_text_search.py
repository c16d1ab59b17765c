"""``GET /runs?text=WORDS``: the runs whose inputs, result or error hold
every word; a text with no word is a 422 naming the field. In process over
ASGI, on a real SQLite file."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

import stalwart as sw
from stalwart.api import create_app

TOKEN = "api-text-search-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@sw.policy
async def reply(question: str) -> str:
    """Answer a question."""
    return f"noted: {question}"


@asynccontextmanager
async def _client(url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(url, [reply], tokens=[TOKEN])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=AUTH
        ) as c:
            yield c


async def test_the_listing_keeps_the_runs_that_hold_every_word(sqlite_url: str) -> None:
    async with _client(sqlite_url) as c:
        for run_id, question in (("a", "where is my refund"), ("b", "parcel 1234 late")):
            body = {"inputs": {"question": question}, "run_id": run_id}
            assert (await c.post("/policies/reply/runs", json=body)).status_code == 201

        async def ids(text: str) -> list[str]:
            r = await c.get("/runs", params={"text": text})
            assert r.status_code == 200, r.text
            return [run["id"] for run in r.json()["runs"]]

        assert await ids("Refund") == ["a"]
        assert await ids('NEAR("parcel* 1234') == []  # "near" is a word no run has
        assert await ids('"parcel" 1234*') == ["b"]
        assert await ids("refund parcel") == []


@pytest.mark.parametrize("text", ['"', "*", "()", "\U000e4059\U0004fbe3", "a " * 101])
async def test_a_text_the_document_refuses_is_a_422_naming_the_field(
    sqlite_url: str, text: str
) -> None:
    # No word (letters or digits), or longer than 200 characters: the API's
    # document says so, and the server refuses exactly that.
    async with _client(sqlite_url) as c:
        r = await c.get("/runs", params={"text": text})
        doc = (await c.get("/openapi.json")).json()
    assert r.status_code == 422, r.text
    assert r.json()["fields"][0]["field"] == "text"
    listing = {p["name"]: p for p in doc["paths"]["/runs"]["get"]["parameters"]}
    schema = listing["text"]["schema"]
    assert schema["type"] == "string"
    described = len(text) <= schema["maxLength"] and re.search(schema["pattern"], text)
    assert not described


async def test_every_text_the_document_allows_is_searched(sqlite_url: str) -> None:
    async with _client(sqlite_url) as c:
        for text in ("é", "a " * 99 + "b", "_x_", "٣"):
            r = await c.get("/runs", params={"text": text})
            assert r.status_code == 200, (text, r.text)
