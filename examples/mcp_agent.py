"""An agent that uses the tools of an MCP server it starts itself, offline.

    python examples/mcp_agent.py "What is the capital of France?"
    python examples/mcp_agent.py --store sqlite:///mcp_agent.db "Capital of Japan?"

Both directions of stalwart.mcp in one file: run with ``--serve``, this file
is an MCP server (its ``capital_of`` policy served over stdio, as
``stalwart mcp serve`` would); run without, it starts that server as a child
process, connects, and hands its tools to an agent. The model here is a small
heuristic (no key needed): it asks the tool once, then answers from the result.
With ``--store`` the run is durable: each MCP call is a recorded step, so a
resumed run never calls a finished tool again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import mcp
from stalwart.testing import ScriptedLLM, call

CAPITALS = {"france": "Paris", "japan": "Tokyo", "peru": "Lima"}


@mcp.tool
@sw.policy
async def capital_of(country: str) -> dict[str, str]:
    """The capital city of a country.

    Args:
        country: The country's name in English.
    """
    name = country.strip().lower()
    if name not in CAPITALS:
        raise LookupError(f"no capital known for {country!r}")
    return {"country": country, "capital": CAPITALS[name]}


def ask_tool(observations: list[sw.Message], options: Sequence[Any]) -> sw.Message:
    """Round 1: call the tool with the country named in the question."""
    question = observations[-1].text.rstrip("?").split()
    country = next((w for w in question if w.lower() in CAPITALS), question[-1])
    return call("capital_of", country=country)


def answer(observations: list[sw.Message], options: Sequence[Any]) -> str:
    """Round 2: answer from the tool's result (its text is the JSON it sent)."""
    result = observations[-1]
    if result.is_error:
        return f"I could not find out: {result.text}"
    return f"The capital is {json.loads(result.text)['capital']}."


model = ScriptedLLM([ask_tool, answer], name="heuristic_model")
SERVER = [sys.executable, os.path.abspath(__file__), "--serve"]  # this file, as the server


@sw.policy
async def agent(ctx: sw.Context, question: str) -> str:
    history = [sw.Message.system("Use the tools."), sw.Message.user(question)]
    async with mcp.connect(SERVER, name="capitals", env={"PATH": os.environ["PATH"]}) as tools:
        while True:
            actions = await ctx.call(model, observations=history, options=tools)
            history += actions
            if not any(m.is_action_call for m in actions):
                return actions[-1].text


async def main(question: str, store: str | None) -> None:
    async with sw.Runner(store) as runner:
        print(await runner.run(agent, question=question))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question", nargs="?", default="What is the capital of France?")
    parser.add_argument("--store", help="a store URL: the run is durable")
    parser.add_argument("--serve", action="store_true", help="be the MCP server (stdio)")
    args = parser.parse_args()
    if args.serve:
        asyncio.run(mcp.serve([capital_of]))
    else:
        asyncio.run(main(args.question, args.store))
