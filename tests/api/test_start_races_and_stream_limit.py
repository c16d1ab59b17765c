"""The HTTP API under load: two identical starts racing on one run id make
one run (201, then 200), and concurrent event streams are limited per
process (503 with Retry-After and a JSON error past the limit)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import free_port

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")

from tests.api.api_app import policies  # noqa: E402

from stalwart.api import create_app  # noqa: E402
from stalwart.core.ledger import RunRecord  # noqa: E402
from stalwart.stores.sqlite import SQLiteStore  # noqa: E402


class Meeting(SQLiteStore):
    """A real SQLite store whose run creation waits until two requests reach
    it: both starts have looked the run id up before either creates it, the
    race two simultaneous requests can run into on any store."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.meet = asyncio.Barrier(2)

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        async with asyncio.timeout(10):
            await self.meet.wait()
        return await super().create_run(run)


async def test_two_identical_simultaneous_starts_make_one_run_201_then_200(
    tmp_path: Path,
) -> None:
    store = Meeting(str(tmp_path / "api.db"))
    app = create_app(store, policies)
    await app.state.runner.open()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            body = {"run_id": "order-7", "inputs": {"name": "ada"}}
            first, second = await asyncio.gather(
                c.post("/policies/greet/runs", json=body), c.post("/policies/greet/runs", json=body)
            )
        assert sorted([first.status_code, second.status_code]) == [200, 201], (
            first.text,
            second.text,
        )
        assert first.json()["id"] == second.json()["id"] == "order-7"
        assert len(await store.list_runs(limit=10)) == 1
    finally:
        await app.state.runner.close()


@contextlib.asynccontextmanager
async def _server(app: Any) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(20):
            while not server.started:
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def _open(c: httpx.AsyncClient, stack: contextlib.AsyncExitStack, run: str) -> Any:
    """Open a stream of the run and read its first event (so it is being
    served); the reader returned must be kept (dropped, it closes the stream)."""
    resp = await stack.enter_async_context(c.stream("GET", f"/runs/{run}/events"))
    assert resp.status_code == 200, await resp.aread()
    lines = resp.aiter_lines()
    while (await anext(lines)).strip() != "":
        pass
    return lines


async def test_streams_past_the_limit_are_refused_with_503_and_retry_after(
    sqlite_url: str,
) -> None:
    app = create_app(sqlite_url, policies, poll=0.05, max_streams=2)
    async with _server(app) as base, httpx.AsyncClient(base_url=base, timeout=20) as c:
        start = {"run_id": "wait-1", "inputs": {"order": "o-1"}}
        assert (await c.post("/policies/approval/runs", json=start)).status_code == 201
        held = contextlib.AsyncExitStack()
        async with held:
            readers = [await _open(c, held, "wait-1"), await _open(c, held, "wait-1")]
            refused = await c.get("/runs/wait-1/events")
            assert refused.status_code == 503
            assert int(refused.headers["Retry-After"]) >= 1
            error = refused.json()["error"]
            assert "2" in error and "stream" in error
            assert refused.headers["content-type"].startswith("application/json")
            # Other endpoints are not limited.
            assert (await c.get("/runs/wait-1")).status_code == 200
            assert len(readers) == 2
        # The streams closed by their clients free their places.
        deadline = time.monotonic() + 20
        while True:
            async with c.stream("GET", "/runs/wait-1/events") as again:
                if again.status_code == 200:
                    break
                body = json.loads(await again.aread())
                assert "stream" in body["error"]
            assert time.monotonic() < deadline, "the closed streams never freed their places"
            await asyncio.sleep(0.05)


def test_the_stream_limit_must_be_a_positive_count(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_streams"):
        create_app(f"sqlite:///{tmp_path / 'api.db'}", policies, max_streams=0)
    described = create_app(f"sqlite:///{tmp_path / 'api.db'}", policies).state.api.openapi
    refused = described["paths"]["/runs/{run_id}/events"]["get"]["responses"]["503"]
    assert "Retry-After" in refused["headers"]
