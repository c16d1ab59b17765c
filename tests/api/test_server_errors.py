"""An exception no handler takes still gets the API's answer: a JSON problem
(``{"error": ..., "fields": []}``) with the security headers every other
response carries, and nothing of the exception's text; the exception is
raised on for the server to log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.api_app import policies

from stalwart.api import create_app
from stalwart.http.access import SECURITY_HEADERS
from stalwart.stores.sqlite import SQLiteStore

SECRET = "detail-that-must-not-leak"


class Broken(SQLiteStore):
    """A real SQLite store whose reads of runs fail with a bug's exception."""

    async def list_runs(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"a bug in the store: {SECRET}")

    async def get_run(self, run_id: str) -> Any:
        raise RuntimeError(f"a bug in the store: {SECRET}")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Broken(str(tmp_path / "api.db")), policies)
    async with app.router.lifespan_context(app):
        # As a server sees it: the exception is raised on, the answer already sent.
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/runs", None),
        ("GET", "/runs/r-1", None),
        ("GET", "/runs/r-1/steps", None),
        ("POST", "/runs/r-1/cancel", None),
        ("POST", "/policies/greet/runs", {"inputs": {"name": "Ada"}}),
    ],
)
async def test_an_unhandled_exception_is_a_json_500_with_the_security_headers(
    client: httpx.AsyncClient, method: str, path: str, body: Any
) -> None:
    r = await client.request(method, path, json=body)
    assert r.status_code == 500, r.text
    assert r.headers["content-type"] == "application/json"
    problem = r.json()
    assert problem["fields"] == []
    assert "RuntimeError" in problem["error"] and SECRET not in r.text
    for name, value in SECURITY_HEADERS.items():
        assert r.headers.get(name) == value, name


async def test_a_good_request_is_answered_as_before(client: httpx.AsyncClient) -> None:
    r = await client.get("/policies")
    assert r.status_code == 200 and {p["name"] for p in r.json()} >= {"greet"}
    assert r.headers["x-content-type-options"] == "nosniff"
