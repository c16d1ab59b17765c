"""A served policy that waits for a person (``ctx.ask``) asks the MCP client
through elicitation, over both protocol eras (a request during the call up
to 2025-11-25; an ``input_required`` result from 2026-07-28): the client's
answer is the signal, and the call answers with the run's outcome."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext
from tests.conftest import free_port
from tests.mcp.serving import serve_command

import stalwart as sw
from mcp import Client, StdioServerParameters
from stalwart.mcp import WAITING

pytestmark = pytest.mark.timeout(90)


def _params(tmp: Path, store: str) -> StdioServerParameters:
    env = {"PATH": os.environ["PATH"], "STAGE_COUNT": str(tmp / "count")}
    command = serve_command(Path(__file__).with_name("served_app.py"), store)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return StdioServerParameters(command=sys.executable, args=command, env=env)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_served_run_asks_the_clients_user_and_goes_on_with_the_answer(
    mode: str, sqlite_url: str, tmp_path: Path
) -> None:
    asked: list[types.ElicitRequestFormParams] = []

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": "true"})

    async with Client(
        _params(tmp_path, sqlite_url), mode=mode, elicitation_callback=user,  # type: ignore[arg-type]
        read_timeout_seconds=30,
    ) as client:  # fmt: skip
        done = await client.call_tool("approve", {"amount": 120})
    assert not done.is_error
    assert [b.text for b in done.content if isinstance(b, types.TextContent)] == ["paid 120"]
    (question,) = asked
    assert question.message == "Pay 120?"
    field = question.requested_schema["properties"]["answer"]
    assert field["type"] == "string" and '"amount":120' in field["description"].replace(" ", "")
    async with sw.Runner(sqlite_url) as runner:  # the answer was the run's signal
        (run,) = await runner.list_runs()
        steps = {s.name: s.output for s in await runner.steps(run.id)}
    assert steps["stalwart.signal:approval"] == "true"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_declined_question_leaves_the_run_waiting_for_someone_else(
    mode: str, sqlite_url: str, tmp_path: Path
) -> None:
    async def user(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with Client(
        _params(tmp_path, sqlite_url), mode=mode, elicitation_callback=user,  # type: ignore[arg-type]
        read_timeout_seconds=30,
    ) as client:  # fmt: skip
        waiting = await client.call_tool("approve", {"amount": 5})
    assert not waiting.is_error
    assert waiting.meta is not None and waiting.meta[WAITING]["signal"] == "approval"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_http_the_served_run_asks_the_clients_user_too(
    mode: str, sqlite_url: str, tmp_path: Path
) -> None:
    async def user(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "no budget"})

    port = free_port()
    command = serve_command(Path(__file__).with_name("served_app.py"), sqlite_url)
    env = {**os.environ, "STAGE_COUNT": str(tmp_path / "count")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *command, "--http", f"127.0.0.1:{port}", env=env
    )
    try:
        for _ in range(300):  # until the server listens
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        async with Client(
            f"http://127.0.0.1:{port}/mcp", mode=mode, elicitation_callback=user,  # type: ignore[arg-type]
            read_timeout_seconds=30,
        ) as client:  # fmt: skip
            done = await client.call_tool("approve", {"amount": 7})
    finally:
        proc.kill()
        await proc.wait()
    texts = [b.text for b in done.content if isinstance(b, types.TextContent)]
    assert texts == ["not paid: no budget"]  # not JSON: the answer is its text
