"""A real ``stalwart mcp serve`` process and the official SDK's client on it,
over stdio or streamable HTTP: how the served-policy tests reach a server."""

# The client waits for the HTTP server's port with a short sleep, on purpose.
# ruff: noqa: ASYNC220

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.conftest import free_port

from mcp import Client, StdioServerParameters

__all__ = ["SERVED_APP", "serve_command", "served_mcp"]

SERVED_APP = Path(__file__).with_name("served_app.py")


def serve_command(app: str | Path, store: str) -> list[str]:
    """The real command, after ``python``: ``stalwart mcp serve --app APP --store URL``."""
    return ["-m", "stalwart.cli", "mcp", "serve", "--app", str(app), "--store", store]


@asynccontextmanager
async def served_mcp(
    transport: str,
    store: str,
    env: dict[str, str] | None = None,
    *,
    app: str | Path = SERVED_APP,
) -> AsyncIterator[Client]:
    """A fresh server process serving ``app`` on ``store`` (``transport`` is
    ``stdio`` or ``http``), and an SDK client on it; the process is gone
    when the block ends. ``env`` is the server's whole environment (None:
    the SDK's default for stdio, this process's for HTTP)."""
    command = serve_command(app, store)
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=command, env=env)
        async with Client(params, read_timeout_seconds=30) as client:
            yield client
        return
    assert transport == "http", f"no MCP transport {transport!r}: stdio or http"
    port = free_port()
    proc = subprocess.Popen([sys.executable, *command, "--http", f"127.0.0.1:{port}"], env=env)
    try:
        for _ in range(300):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=30) as client:
            yield client
    finally:
        proc.kill()
        proc.wait(10)
