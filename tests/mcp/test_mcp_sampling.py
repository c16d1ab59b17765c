"""A server's sampling request is answered by the run's model, as a step of
the tool's call: recorded, so a call that runs again never asks the model again."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from tests.mcp.waiting import suspended

import stalwart as sw
from stalwart import mcp
from stalwart.testing import ScriptedLLM

pytestmark = pytest.mark.timeout(90)


async def test_the_reference_servers_sampling_is_answered_by_the_runs_model(
    everything: list[str], sqlite_url: str
) -> None:
    seen: list[list[sw.Message]] = []

    def summarize(observations: list[sw.Message], options: object) -> str:
        seen.append(observations)
        return "Lima is the capital of Peru."

    model = ScriptedLLM([summarize], name="model")

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        env = {"PATH": os.environ["PATH"]}
        async with mcp.connect(everything, name="everything", env=env, model=model) as tools:
            out = await ctx.call(tools.tool("trigger-sampling-request"), prompt="Peru?")
            return out.text

    async with sw.Runner(sqlite_url) as runner:
        text = await runner.run(agent, run_id="s")
        steps = {s.key: s for s in await runner.steps("s")}
    assert "Lima is the capital of Peru." in text  # the server got the model's reply
    (asked,) = seen
    assert asked[0].role == "system" and asked[0].text == "You are a helpful test server."
    assert asked[1].role == "user" and "Peru?" in asked[1].text
    # The model's answer is a recorded step under the tool's call.
    assert steps["2"].name == "trigger-sampling-request"
    assert steps["2.1"].name == "model" and steps["2.1"].output is not None
    assert "Lima is the capital of Peru." in steps["2.1"].output


async def test_without_a_model_the_client_offers_no_sampling(everything: list[str]) -> None:
    env = {"PATH": os.environ["PATH"]}
    async with mcp.connect(everything, name="everything", env=env) as tools:
        names = {t.name for t in tools}
    # The server offers its sampling tool only to a client that samples.
    assert "trigger-sampling-request" not in names and "echo" in names
    async with mcp.connect(everything, name="everything", env=env, model=ScriptedLLM([])) as tools:
        assert "trigger-sampling-request" in {t.name for t in tools}


async def test_a_call_that_runs_again_gets_the_models_recorded_reply(
    asking: tuple[list[str], dict[str, str], Path], store_url: str
) -> None:
    server, env, count = asking
    sampler = ScriptedLLM(["Stalwart keeps runs."], name="sampler")

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        async with mcp.connect(server, name="asking", env=env, model=sampler) as tools:
            out = await ctx.call(tools.tool("publish"), topic="stalwart")
            return out.text

    # The tool asks the model, then the user: the run waits for the user.
    async with sw.Runner(store_url) as runner:
        await runner.start(agent, run_id="p")
        await suspended(runner, "p")
    assert sampler.calls == 1
    # Another runner on the same file: the answer comes, the call runs again.
    async with sw.Runner(store_url, policies=[agent]) as runner:
        await runner.signal("p", mcp.ELICITATION, {"approve": True, "note": "(ok)"})
        handle = await runner.start(agent, run_id="p")
        assert await handle.result() == "published: Stalwart keeps runs. (ok)"
        steps = [s.name for s in await runner.steps("p")]
    assert sampler.calls == 1  # the second execution read the model's reply from the ledger
    assert steps.count("sampler") == 1
    assert count.read_text().splitlines() == ["publish"]  # the tool's body ran once


async def test_a_model_still_replying_when_the_server_asks_the_user_is_not_asked_again(
    asking: tuple[list[str], dict[str, str], Path], sqlite_url: str
) -> None:
    """From 2026-07-28 a server asks its model and its user in one round: the
    question suspends the run while the model is still writing, and its
    reply is kept for the call's next execution."""
    server, env, _ = asking

    async def slow(observations: list[sw.Message], options: object) -> str:
        await asyncio.sleep(0.3)  # still replying when the user is asked
        return "A slow summary."

    sampler = ScriptedLLM([slow], name="sampler")

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        async with mcp.connect(server, name="asking", env=env, model=sampler) as tools:
            return (await ctx.call(tools.tool("publish"), topic="x")).text

    async with sw.Runner(sqlite_url, policies=[agent]) as runner:
        handle = await runner.start(agent, run_id="slow")
        await suspended(runner, "slow")
        await runner.signal("slow", mcp.ELICITATION, {"approve": True})
        handle = await runner.start(agent, run_id="slow")
        assert await handle.result() == "published: A slow summary."
    assert sampler.calls == 1
