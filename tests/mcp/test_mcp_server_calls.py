"""What the official MCP SDK client gets from a served policy for calls that
are not plain: a run that waits for a person, arguments of the wrong JSON
type, a request whose name or arguments have the wrong shape.

Against a real `stalwart mcp serve` process (served_app.py), over stdio and
streamable HTTP.
"""

# ruff: noqa: ASYNC220

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

import stalwart as sw
from mcp import Client, StdioServerParameters
from stalwart.mcp import WAITING

HERE = Path(__file__).parent
APP = str(HERE / "served_app.py")
SERVE = ["-m", "stalwart.cli", "mcp", "serve", "--app", APP, "--store"]
pytestmark = pytest.mark.timeout(90)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def served(transport: str, store: str, tmp: Path) -> AsyncIterator[Client]:
    env = {**os.environ, "APP_COUNT": str(tmp / "count")}
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=[*SERVE, store], env=env)
        async with Client(params, read_timeout_seconds=30) as client:
            yield client
        return
    port = _free_port()
    proc = subprocess.Popen([sys.executable, *SERVE, store, "--http", f"127.0.0.1:{port}"], env=env)
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


def text(result: Any) -> str:
    return "\n".join(b.text for b in result.content)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_call_of_a_waiting_policy_says_what_it_waits_for(
    transport: str, sqlite_url: str, tmp_path: Path
) -> None:
    async with served(transport, sqlite_url, tmp_path) as client:
        waiting = await asyncio.wait_for(client.call_tool("approve", {"amount": 120}), 30)
        assert not waiting.is_error
        said = waiting.meta[WAITING]
        run_id = said["run_id"]
        assert said == {
            "run_id": run_id,
            "signal": "approval",
            "prompt": "Pay 120?",
            "about": {"amount": 120},
        }
        assert f"The run {run_id!r} is waiting for the signal 'approval'." in text(waiting)
        assert "It asks: Pay 120?" in text(waiting)
        assert f"stalwart signal {run_id} approval" in text(waiting)

        # Called again before anyone answered: still waiting, the same run.
        again = await asyncio.wait_for(client.call_tool("approve", {"amount": 120}), 30)
        assert again.meta[WAITING]["run_id"] == run_id

        # A person answers (another process on the store); the same call
        # now gives the run's outcome.
        async with sw.Runner(sqlite_url) as other:
            await other.signal(run_id, "approval", True)
        for _ in range(300):
            done = await asyncio.wait_for(client.call_tool("approve", {"amount": 120}), 30)
            if done.meta is None or WAITING not in done.meta:
                break
            await asyncio.sleep(0.05)
        assert not done.is_error and text(done) == "paid 120"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_arguments_are_validated_as_every_policy_call_is(
    transport: str, sqlite_url: str, tmp_path: Path
) -> None:
    async with served(transport, sqlite_url, tmp_path) as client:
        refused = await client.call_tool("add", {"a": True})
        assert refused.is_error
        assert "a: Input should be a number, not a boolean" in text(refused)
        coerced = await client.call_tool("add", {"a": "6", "b": 1})  # as a model's "6" is read
        assert not coerced.is_error and coerced.structured_content == {"sum": 7}


class LooseCall(types.Request[dict[str, Any], Literal["tools/call"]]):
    """A tools/call whose params are any JSON: what the SDK's typed call would not send."""

    method: Literal["tools/call"] = "tools/call"
    params: dict[str, Any]


async def _raw_call(client: Client, params: dict[str, Any]) -> types.CallToolResult:
    return await client.session.send_request(LooseCall(params=params), types.CallToolResult)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"name": "add", "arguments": [1, 2]}, "'add': arguments must be an object"),
        ({"name": "add", "arguments": "a=1"}, "'add': arguments must be an object"),
        ({"name": 7, "arguments": {"a": 1}}, "name must be the tool's name as a string"),
    ],
)
async def test_a_call_of_the_wrong_shape_is_an_error_naming_the_field(
    transport: str, params: dict[str, Any], said: str, sqlite_url: str, tmp_path: Path
) -> None:
    async with served(transport, sqlite_url, tmp_path) as client:
        if transport == "http" and not isinstance(params["name"], str):
            # Streamable HTTP carries the name in a header too: the SDK's
            # transport refuses the request before it reaches the server,
            # naming the field as well.
            with pytest.raises(MCPError, match="'name' parameter"):
                await _raw_call(client, params)
        else:
            result = await _raw_call(client, params)
            assert result.is_error
            assert said in text(result)
        assert (await client.call_tool("add", {"a": 1})).structured_content == {"sum": 2}
