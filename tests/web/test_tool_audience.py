"""The inspector shows a person what an MCP tool's result holds for people:
not its parts for the assistant only, and the content for the user only,
which the model was never sent, in the run's conversation."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import stalwart as sw
from stalwart import mcp
from stalwart.testing import ScriptedLLM, call

from .conftest import client

EDGE = [sys.executable, str(Path(__file__).resolve().parents[1] / "mcp" / "edge_server.py")]
NOTE = "The chart is shown to the user; do not describe it."


async def test_a_tools_parts_for_the_assistant_only_are_not_shown(
    tmp_path: Path, sqlite_url: str
) -> None:
    env = {"PATH": os.environ["PATH"], "EDGE_COUNT": str(tmp_path / "count")}
    model = ScriptedLLM([call("chart"), "Sales rose."])

    @sw.policy
    async def report(ctx: sw.Context) -> str:
        history = [sw.Message.user("How are sales?")]
        async with mcp.connect(EDGE, name="edge", env=env, allow=["chart"]) as tools:
            while True:
                out = await ctx.call(model, observations=history, options=tools)
                history += out
                if not any(m.is_action_call for m in out):
                    return out[-1].text

    async with sw.Runner(sqlite_url) as runner:
        await runner.run(report, run_id="chart-1")
        steps = await runner.steps("chart-1")
    assert any(NOTE in (s.args or "") + (s.output or "") for s in steps)  # the model read it
    async with client(sqlite_url) as c:
        page = (await c.get("/run?id=chart-1")).text
    found = re.search(r'<section class="conversation">(.*?)</section>', page, re.S)
    assert found is not None
    conversation = found.group(1)  # (the step records beside it are shown as recorded)
    assert "Sales rose 12%." in conversation
    assert NOTE not in conversation
    assert "media: image/png" in conversation  # the image for the user
