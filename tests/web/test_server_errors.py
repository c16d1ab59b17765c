"""An exception no handler takes still gets an answer like every other: a
JSON problem (``{"error": ..., "fields": []}``) with the security headers
every inspector response carries, naming the exception's type and nothing of
its text; it is raised on for the server to log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart.http.access import SECURITY_HEADERS
from stalwart.stores.sqlite import SQLiteStore
from stalwart.web import create_app

SECRET = "detail-that-must-not-leak"


class Broken(SQLiteStore):
    """A real SQLite store whose reads of runs fail with a bug's exception."""

    async def list_runs(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"a bug in the store: {SECRET}")

    async def get_run(self, run_id: str) -> Any:
        raise RuntimeError(f"a bug in the store: {SECRET}")

    async def waiting_for_signals(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"a bug in the store: {SECRET}")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Broken(str(tmp_path / "ui.db")), hosts=("127.0.0.1",))
    async with app.router.lifespan_context(app):
        # As a server sees it: the exception is raised on, the answer already sent.
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c


@pytest.mark.parametrize("path", ["/runs", "/run?id=r-1", "/waiting", "/run/live?id=r-1"])
@pytest.mark.parametrize("accept", ["text/html", "*/*"])
async def test_an_unhandled_exception_is_a_json_500_with_the_security_headers(
    client: httpx.AsyncClient, path: str, accept: str
) -> None:
    r = await client.get(path, headers={"Accept": accept})
    assert r.status_code == 500, r.text
    assert r.headers["content-type"] == "application/json"
    problem = r.json()
    assert problem["fields"] == []
    assert "RuntimeError" in problem["error"] and SECRET not in r.text
    for name, value in SECURITY_HEADERS.items():
        assert r.headers.get(name) == value, name


async def test_pages_that_work_are_answered_as_before(client: httpx.AsyncClient) -> None:
    r = await client.get("/static/style.css")
    assert r.status_code == 200
    assert r.headers["x-frame-options"] == "DENY"
