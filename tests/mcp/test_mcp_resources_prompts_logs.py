"""A server's resources and prompts are listed and read as recorded steps (a
resumed run reads what it read, from the ledger), and its log messages are
events of the run that made the call."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.mcp.waiting import suspended

import stalwart as sw
from stalwart import mcp

pytestmark = pytest.mark.timeout(90)


async def test_the_reference_servers_resources_and_prompts_are_read_as_steps(
    everything: list[str], sqlite_url: str
) -> None:
    @sw.policy
    async def reader(ctx: sw.Context) -> dict[str, object]:
        env = {"PATH": os.environ["PATH"]}
        async with mcp.connect(everything, name="everything", env=env) as tools:
            resources = await tools.resources()
            text = await tools.read("demo://resource/dynamic/text/1")
            blob = await tools.read("demo://resource/dynamic/blob/2")
            prompts = await tools.prompts()
            asked = await tools.prompt("args-prompt", city="Lima", state="Lima")
            await ctx.wait_for("go")
            return {
                "uris": [r["uri"] for r in resources],
                "text": text.text,
                "text_id": text.id,
                "blob": [type(p).__name__ for p in blob.parts],
                "prompts": [p["name"] for p in prompts],
                "asked": [(m.role, m.text) for m in asked],
            }

    async with sw.Runner(sqlite_url) as runner:
        await runner.start(reader, run_id="r")
        await suspended(runner, "r")
        first = {s.key: s for s in await runner.steps("r")}
    names = [first[k].name for k in ("2", "3", "4", "5", "6")]
    assert names == [
        "mcp_list_resources", "mcp_read_resource", "mcp_read_resource",
        "mcp_list_prompts", "mcp_get_prompt",
    ]  # fmt: skip
    async with sw.Runner(sqlite_url, policies=[reader]) as runner:
        await runner.signal("r", "go")
        out = await (await runner.start(reader, run_id="r")).result()
        again = await runner.steps("r")
    assert "demo://resource/static/document/architecture.md" in out["uris"]
    assert "Resource 1" in str(out["text"])
    assert out["blob"] == ["Media"]
    assert {"simple-prompt", "args-prompt"} <= set(out["prompts"])  # type: ignore[arg-type]
    assert out["asked"] == [("user", "What's weather in Lima, Lima?")]
    # The resumed run read from the ledger: the same message, no new step.
    assert first["3"].output is not None and str(out["text_id"]) in first["3"].output
    assert len([s for s in again if s.name.startswith("mcp_")]) == 6


async def test_a_servers_log_messages_are_events_of_the_calling_run(
    asking: tuple[list[str], dict[str, str], Path],
) -> None:
    server, env, _ = asking

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        async with mcp.connect(server, name="asking", env=env) as tools:
            return (await ctx.call(tools.tool("chatty"))).text

    async with sw.Runner() as runner:
        handle = await runner.start(agent, run_id="l")
        logs = [e.value async for e in handle.events() if isinstance(e, sw.Emitted)]
        assert await handle.result() == "done"
    assert logs == [
        mcp.Log("asking", "info", None, "starting"),
        mcp.Log("asking", "warning", None, "almost done"),
    ]
