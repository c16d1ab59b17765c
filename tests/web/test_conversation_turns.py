"""An agent's conversation as turns: the tool calls a reply asked for are
folded under it, each with the result that answered it."""

from __future__ import annotations

import re
from html import unescape

import pytest

from .conftest import client
from .shapes_app import seed
from .web_app import HOSTILE


def _conversation(html: str) -> str:
    return html.split('<section class="conversation">', 1)[1].split("</section>", 1)[0]


@pytest.fixture
async def seeded_shapes(store_url: str) -> str:
    await seed(store_url)
    return store_url


async def test_three_calls_of_one_reply_fold_under_it_each_with_its_result(
    seeded_shapes: str,
) -> None:
    async with client(seeded_shapes) as c:
        html = (await c.get("/run", params={"id": "trio-1"})).text
    said = _conversation(html)
    bubbles = said.split('<div class="bubble ')[1:]
    roles = [b.split('"', 1)[0] for b in bubbles]
    assert roles == ["role-system", "role-user", "role-assistant", "role-assistant"]
    reply = bubbles[2]
    assert "3 tool calls:" in reply
    calls = reply.split('<div class="tool-call">')[1:]
    assert len(calls) == 3
    for call, city in zip(calls, ("Paris", "Oslo", HOSTILE), strict=True):
        text = unescape(re.sub(r"<[^>]+>", "", call))
        assert "calls weather" in text and "result of weather" in text
        assert f"sunny in {city}" in text  # the result under the call that asked for it
    assert "Sunny everywhere." in bubbles[3] and "tool-call" not in bubbles[3]
    assert "<script>" not in said and "<img" not in said


async def test_a_call_still_running_says_it_has_no_result_yet(sqlite_url: str) -> None:
    import asyncio

    import stalwart as sw
    from stalwart import llm
    from stalwart.testing import ScriptedLLM, call

    gate = asyncio.Event()

    @sw.policy
    async def slow_tool(x: str) -> str:
        """Wait for the test."""
        await gate.wait()
        return x

    agent = llm.Agent(
        ScriptedLLM([[call("slow_tool", x="a")], "done"]), tools=[slow_tool], name="waiter"
    )
    async with sw.Runner(sqlite_url, policies=[agent]) as r:
        handle = await r.start(agent, "go", run_id="slow-1")
        while "1" not in await r.store.load_steps("slow-1"):
            await asyncio.sleep(0.02)
        async with client(sqlite_url) as c:
            html = (await c.get("/run", params={"id": "slow-1"})).text
        gate.set()
        await handle.result()
    said = _conversation(html)
    assert "1 tool call:" in said and "(no result yet)" in said
