"""A server's question to the user (elicitation) is a durable wait for a
person, listed with every other (``stalwart runs waiting``), answered by the
signal ``elicitation``; the answer is checked against what the server asked."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from tests.mcp.waiting import suspended

import stalwart as sw
from stalwart import mcp
from stalwart.testing import ScriptedLLM

pytestmark = pytest.mark.timeout(90)

ANSWER = {
    "name": "Ada",
    "check": True,
    "email": "ada@example.com",
    "homepage": "https://example.com",
    "birthdate": "1815-12-10",
    "integer": 7,
    "number": 1.5,
    "untitledSingleSelectEnum": "Joey",
}


async def test_the_reference_servers_question_waits_for_a_person_and_takes_the_signal(
    everything: list[str], store_url: str
) -> None:
    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        env = {"PATH": os.environ["PATH"]}
        async with mcp.connect(everything, name="everything", env=env) as tools:
            out = await ctx.call(tools.tool("trigger-elicitation-request"))
            return out.text

    async with sw.Runner(store_url) as runner:
        await runner.start(agent, run_id="e")
        rec = await suspended(runner, "e")
    assert rec.waiting_for == mcp.ELICITATION

    # Listed with every wait for a person, with what the server asks.
    listed = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "stalwart.cli", "runs", "waiting", "--json", "--store", store_url,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    out, _ = await listed.communicate()
    assert listed.returncode == 0
    document = json.loads(out)
    (wait,) = document["runs"] if isinstance(document, dict) else document
    assert wait["signal"] == mcp.ELICITATION
    assert wait["prompt"] == "Please provide inputs for the following fields:"
    about = wait["about"]
    assert about["server"] == "everything" and about["tool"] == "trigger-elicitation-request"
    assert about["schema"]["properties"]["email"]["format"] == "email"

    async with sw.Runner(store_url, policies=[agent]) as runner:
        await runner.signal("e", mcp.ELICITATION, ANSWER)
        text = await (await runner.start(agent, run_id="e")).result()
    assert "User provided the requested information" in text and "Name: Ada" in text


async def test_a_declined_question_reaches_the_server_declined(
    asking: tuple[list[str], dict[str, str], Path], sqlite_url: str
) -> None:
    server, env, _ = asking
    sampler = ScriptedLLM(["A summary."], name="sampler")

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        async with mcp.connect(server, name="asking", env=env, model=sampler) as tools:
            return (await ctx.call(tools.tool("publish"), topic="x")).text

    async with sw.Runner(sqlite_url) as runner:
        handle = await runner.start(agent, run_id="d")
        await suspended(runner, "d")
        await runner.signal("d", mcp.ELICITATION, {"action": "decline"})
        assert await handle.result() == "not published (decline): A summary."


async def test_an_answer_that_does_not_fit_fails_the_call_naming_the_field(
    asking: tuple[list[str], dict[str, str], Path], sqlite_url: str
) -> None:
    server, env, count = asking
    sampler = ScriptedLLM(["A summary."], name="sampler")

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        async with mcp.connect(server, name="asking", env=env, model=sampler) as tools:
            try:
                return (await ctx.call(tools.tool("publish"), topic="x")).text
            except ValueError as exc:
                return f"failed: {exc}"

    async with sw.Runner(sqlite_url) as runner:
        handle = await runner.start(agent, run_id="bad")
        await suspended(runner, "bad")
        await runner.signal("bad", mcp.ELICITATION, {"approve": "maybe"})
        said = await handle.result()
    assert said.startswith("failed: the answer to the elicitation of asking/publish")
    assert "approve: 'maybe' is not of type 'boolean'" in said
    assert not count.exists()  # the server never ran the tool's body


async def test_in_memory_a_question_waits_for_the_signal_in_the_run(
    asking: tuple[list[str], dict[str, str], Path],
) -> None:
    server, env, _ = asking
    sampler = ScriptedLLM(["A summary."], name="sampler")
    asked: list[object] = []

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        async with mcp.connect(server, name="asking", env=env, model=sampler) as tools:
            return (await ctx.call(tools.tool("publish"), topic="x")).text

    async with sw.Runner() as runner:
        handle = await runner.start(agent, run_id="m")
        async for event in handle.events():
            if isinstance(event, sw.Emitted) and isinstance(event.value, dict):
                asked.append(event.value)
                await runner.signal("m", mcp.ELICITATION, {"approve": True})
                break
        assert await handle.result() == "published: A summary."
    assert asked == [{"prompt": "Publish the summary of x?", "signal": mcp.ELICITATION}]
