"""The SDK's own client against stalwart.mcp.serve in a real process,
over stdio and streamable HTTP, killed with SIGKILL mid-call."""

# The tests poll marker files the servers write and start real processes, on purpose.
# ruff: noqa: ASYNC240

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from tests.mcp.serving import served_mcp

pytestmark = pytest.mark.timeout(90)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_sdk_client_against_served_policies(
    transport: str, tmp_path: Path, sqlite_url: str
) -> None:
    count, block = tmp_path / "count", tmp_path / "block"
    env = {**os.environ, "APP_COUNT": str(count), "APP_BLOCK": str(block)}
    async with served_mcp(transport, sqlite_url, env) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {"add", "long_job", "refuse", "approve"}
        schema = listed["add"].input_schema
        assert schema["properties"]["a"] == {"type": "integer", "description": "The first addend."}
        assert schema["required"] == ["a"]
        assert listed["long_job"].description.startswith("A job of two recorded stages")

        ok = await client.call_tool("add", {"a": 2, "b": 3})
        assert not ok.is_error and ok.structured_content == {"sum": 5}
        assert ok.content[0].text == '{"sum": 5}'
        bad = await client.call_tool("add", {"a": "two"})
        assert bad.is_error and "a: Input should be a valid integer" in bad.content[0].text
        refused = await client.call_tool("refuse", {"why": "policy"})
        assert refused.is_error and refused.content[0].text == "PermissionError: refused: policy"

        # A long call: stage 1 runs, stage 2 blocks; the server is SIGKILLed.
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append((p, total, message))

        block.write_text("")
        call = asyncio.create_task(
            client.call_tool("long_job", {"name": "j"}, progress_callback=on_progress)
        )
        started = Path(str(block) + ".started")
        for _ in range(600):
            if started.exists():
                break
            await asyncio.sleep(0.02)
        for _ in range(250):  # the notification may trail the marker file a little
            if progress:
                break
            await asyncio.sleep(0.02)
        assert progress == [(1.0, 2.0, "stage 1 done")]
        os.kill(int(started.read_text()), signal.SIGKILL)
        with pytest.raises(BaseException):  # noqa: B017 - the transport's own error
            await asyncio.wait_for(call, 30)
    assert _lines(count) == ["j:1", "j:2"]

    # The client retries the same request on a restarted server: the run
    # resumes (stage 1 from the ledger), and its result is the recorded one.
    block.unlink()
    async with served_mcp(transport, sqlite_url, env) as client:
        first = await client.call_tool("long_job", {"name": "j"})
        assert not first.is_error, first.content
        assert _lines(count) == ["j:1", "j:2", "j:2"]  # stage 1 not run again
        again = await client.call_tool("long_job", {"name": "j"})
        assert again.content[0].text == first.content[0].text
        assert _lines(count) == ["j:1", "j:2", "j:2"]  # nothing ran: the recorded result
