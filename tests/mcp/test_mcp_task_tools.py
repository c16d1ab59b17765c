"""A tool its server runs only as a task (``execution.taskSupport: "required"``)
is not offered to the model: every plain call of it would fail."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

import stalwart as sw
from stalwart import mcp
from stalwart.core.policy import as_policy
from stalwart.testing import ScriptedLLM, call

SERVER = [sys.executable, str(Path(__file__).with_name("edge_server.py"))]
pytestmark = pytest.mark.timeout(60)


def _env(tmp: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "EDGE_COUNT": str(tmp / "count")}


async def test_a_task_only_tool_is_not_offered_and_the_log_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="stalwart.mcp"):
        async with mcp.connect(SERVER, name="edge", env=_env(tmp_path)) as tools:
            assert sorted(t.name for t in tools) == ["chart", "echo"]
    said = [r.getMessage() for r in caplog.records if r.name == "stalwart.mcp"]
    assert any("not offering render" in m and "taskSupport 'required'" in m for m in said)


async def test_a_model_offered_the_server_never_sees_the_task_only_tool(tmp_path: Path) -> None:
    offered: list[str] = []

    def reply(seen: list[sw.Message], options: list[object]) -> sw.Message:
        offered.extend(as_policy(o).name for o in options)
        return call("echo", text="hi")

    model = ScriptedLLM([reply, "done"])

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        history = [sw.Message.user("go")]
        async with mcp.connect(SERVER, name="edge", env=_env(tmp_path)) as tools:
            while True:
                out = await ctx.call(model, observations=history, options=tools)
                history += out
                if not any(m.is_action_call for m in out):
                    return history[-2].text

    assert await sw.Runner().run(agent) == "hi"
    assert sorted(offered) == ["chart", "echo"]


async def test_allow_naming_a_task_only_tool_says_it_cannot_be_called(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"runs render only as tasks"):
        await mcp.connect(SERVER, name="edge", env=_env(tmp_path), allow=["render", "echo"])
