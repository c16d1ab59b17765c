"""An MCP server that asks its client, and a durable agent that answers, offline.

    python examples/mcp_asking.py --store sqlite:///newsroom.db "MCP"
    stalwart runs waiting --store sqlite:///newsroom.db        # what it asks
    python examples/mcp_asking.py --store sqlite:///newsroom.db --answer '{"approve": true}'

Run with ``--serve``, this file is an MCP server on the Python SDK's
``MCPServer``: its ``publish`` tool asks the client's model for a one-line
summary (sampling), then asks the client's user whether to publish it
(elicitation), and logs as it goes; it also serves a style guide as a
resource. Run without, it starts that server, reads the style guide (a
recorded step), and lets its agent call ``publish``:

- the server's sampling request is answered by the agent's own model, as a
  recorded step of the tool's call;
- the server's question to the user suspends the run: it waits, durably,
  for the signal ``elicitation`` (listed by ``stalwart runs waiting``);
- ``--answer JSON`` sends that signal and resumes the run where it waited:
  the model is not asked for the summary again.

The model is a small heuristic (no key needed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import mcp_types as types
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
    Sample,
)
from pydantic import BaseModel

import stalwart as sw
from stalwart import mcp
from stalwart.testing import ScriptedLLM, call

RUN_ID = "newsroom-1"
SUMMARIZE = "You write one-line summaries."


# -- the server ---------------------------------------------------------------------
server = MCPServer("newsroom")


class Approval(BaseModel):
    approve: bool


def summary(topic: str) -> Sample:
    """Ask the client's model for a one-line summary."""
    ask = types.TextContent(type="text", text=f"Summarize {topic}.")
    return Sample([types.SamplingMessage(role="user", content=ask)],
                  system_prompt=SUMMARIZE, max_tokens=60)  # fmt: skip


def approval(topic: str) -> Elicit[Approval]:
    """Ask the client's user whether to publish."""
    return Elicit(f"Publish the summary of {topic}?", Approval)


@server.tool()
async def publish(
    topic: str,
    ctx: Context,
    sampled: Annotated[types.CreateMessageResult, Resolve(summary)],
    answer: Annotated[ElicitationResult[Approval], Resolve(approval)],
) -> str:
    """Summarize a topic with the client's model; publish it if the user approves."""
    text = sampled.content.text if isinstance(sampled.content, types.TextContent) else ""
    await ctx.info(f"summary of {topic}: {text}")
    if isinstance(answer, AcceptedElicitation) and answer.data.approve:
        return f"Published: {text}"
    return f"Not published: {text}"


@server.resource("newsroom://style", mime_type="text/plain")
def style() -> str:
    """The house style."""
    return "One line. No jargon."


# -- the agent ------------------------------------------------------------------------
def first(observations: list[sw.Message], options: Sequence[Any]) -> Any:
    """The model's first reply in a conversation: a summary when the server
    samples it (its system prompt says so), else a call of ``publish``."""
    if observations[0].text == SUMMARIZE:
        topic = observations[-1].text.removeprefix("Summarize ").rstrip(".")
        return f"{topic} keeps agents' work durable."
    return call("publish", topic=observations[-1].text)


def done(observations: list[sw.Message], options: Sequence[Any]) -> str:
    return f"Done: {observations[-1].text}"


model = ScriptedLLM([first, done], name="newsroom_model")
SERVER = [sys.executable, os.path.abspath(__file__), "--serve"]


@sw.policy
async def agent(ctx: sw.Context, topic: str) -> str:
    env = {"PATH": os.environ["PATH"]}
    async with mcp.connect(SERVER, name="newsroom", env=env, model=model) as tools:
        style = await tools.read("newsroom://style")  # a recorded step
        history = [sw.Message.system(f"House style: {style.text}"), sw.Message.user(topic)]
        while True:
            actions = await ctx.call(model, observations=history, options=tools)
            history += actions
            if not any(m.is_action_call for m in actions):
                return actions[-1].text


async def main(topic: str, store: str, answer: str | None) -> None:
    async with sw.Runner(store, policies=[agent]) as runner:
        if answer is not None:
            await runner.signal(RUN_ID, mcp.ELICITATION, json.loads(answer))
        handle = await runner.start(agent, topic=topic, run_id=RUN_ID)

        async def logs() -> None:  # the server's log messages, events of the run
            async for event in handle.events():
                if isinstance(event, sw.Emitted) and isinstance(event.value, mcp.Log):
                    print(f"[server log] {event.value.data}")

        shown = asyncio.create_task(logs())
        rec = await runner.get_run(RUN_ID)
        while rec.status in ("pending", "running"):  # until it ends, or waits for a person
            await asyncio.wait([shown], timeout=0.05)
            rec = await runner.get_run(RUN_ID)
        if rec.status == "suspended":
            shown.cancel()
            print(f"The run waits for the signal {rec.waiting_for!r}: answer with --answer JSON")
        else:
            await shown
            print(await handle.result())


if __name__ == "__main__":
    if "--serve" in sys.argv:
        server.run()
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("topic", nargs="?", default="MCP")
        parser.add_argument("--store", default="sqlite:///newsroom.db")
        parser.add_argument("--answer", help="the user's answer, as JSON")
        args = parser.parse_args()
        asyncio.run(main(args.topic, args.store, args.answer))
