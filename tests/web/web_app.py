"""The application the inspector's tests run: policies a worker executes.

Run as ``python -m tests.web.web_app <store-url>`` it is a worker process
on that store; imported, it gives the policies and :func:`seed`, which
records one run of each kind for the pages to show.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.testing import ScriptedLLM, call

HOSTILE = "<script>alert('pwned')</script><img src=x onerror=alert('img')>"


@sw.policy
async def greet(name: str) -> str:
    """Say hello."""
    return f"hello {name}"


@sw.policy
async def ship(ctx: sw.Context, item: str) -> str:
    """Wait for a human to approve shipping ``item``."""
    ok = await ctx.ask(f"Ship {item}?", signal="approve")
    return f"shipped {item}" if ok else f"kept {item}"


@sw.policy
async def hostile_wait(ctx: sw.Context) -> str:
    """Wait for a signal whose name is markup."""
    return str(await ctx.wait_for(HOSTILE))


@sw.policy
async def broken(reason: str) -> str:
    """Fail with ``reason``."""
    raise ValueError(reason)


@sw.policy
async def fan_out(ctx: sw.Context, names: list[str]) -> list[str]:
    """Greet each name in a child run of its own."""
    return list(await ctx.map(greet, names))


@sw.policy
async def lookup(query: str) -> str:
    """Look ``query`` up."""
    return f"found {query}: {HOSTILE}"


def _answer(observations: list[Message], options: object) -> list[Message]:
    reply = Message.assistant(f"The answer, with markup: {HOSTILE}")
    usage = {"usage": {"input_tokens": 120, "output_tokens": 30}, "model": "test-model-1"}
    return [dataclasses.replace(reply, meta=usage)]


helper = llm.Agent(
    ScriptedLLM([call("lookup", query="stalwart"), _answer]),
    instructions="Answer from the library.",
    tools=[lookup],
    name="helper",
)

POLICIES = [greet, ship, hostile_wait, broken, fan_out, lookup, helper]


async def seed(url: str) -> None:
    """One run of each kind: finished, failed, waiting, with children, an agent."""
    async with sw.Runner(url, policies=POLICIES) as r:
        await r.run(greet, "ada", run_id="greet-ada")
        with __import__("contextlib").suppress(Exception):
            await r.run(broken, HOSTILE, run_id="broken-1")
        await r.run(helper, "What is Stalwart?", run_id="agent-1")
        await r.run(fan_out, ["x", "y"], run_id="family")
        await r.run(greet, "mallory", run_id=HOSTILE)
        await r.start(ship, "the parcel", run_id="ship-1")
        await r.start(hostile_wait, run_id="waits-hostile")
        for _ in range(200):
            runs = {x.id: x.status for x in await r.list_runs(limit=50)}
            if runs.get("ship-1") == "suspended" and runs.get("waits-hostile") == "suspended":
                break
            await asyncio.sleep(0.02)


async def work(url: str) -> None:
    """Be a worker until SIGTERM."""
    print("worker ready", flush=True)
    await sw.Runner(url, policies=POLICIES, poll_interval=0.1).serve()


if __name__ == "__main__":
    asyncio.run(work(sys.argv[1]))
