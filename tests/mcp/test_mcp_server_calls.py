"""What the official MCP SDK client gets from a served policy for calls that
are not plain: a run that waits for a person, arguments of the wrong JSON
type, a request whose name or arguments have the wrong shape.

Against a real `stalwart mcp serve` process (served_app.py), over stdio and
streamable HTTP.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from tests.mcp.serving import served_mcp

import stalwart as sw
from mcp import Client
from stalwart.mcp import WAITING

pytestmark = pytest.mark.timeout(90)


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "APP_COUNT": str(tmp / "count")}


def text(result: Any) -> str:
    return "\n".join(b.text for b in result.content)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_call_of_a_waiting_policy_says_what_it_waits_for(
    transport: str, sqlite_url: str, tmp_path: Path
) -> None:
    async with served_mcp(transport, sqlite_url, _env(tmp_path)) as client:
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
    async with served_mcp(transport, sqlite_url, _env(tmp_path)) as client:
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
    async with served_mcp(transport, sqlite_url, _env(tmp_path)) as client:
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
