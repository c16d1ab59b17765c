"""The runs whose shape a run page draws: a flow that loops and fails, a
flow a SIGKILL stops in a node, an agent that calls three tools at once.

Run as ``python -m tests.web.shapes_app <store-url> crash`` it starts the
flow ``crashing`` and prints ``in slow`` when its ``Slow`` node runs, where
a test kills it; imported, it gives the policies (for the inspector to read
the flows' graphs) and :func:`seed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.flow import Flow, Node
from stalwart.testing import ScriptedLLM, call

from .web_app import HOSTILE, greet


class Draft(Node):
    def exec(self, prep_res: Any) -> str:
        return "a draft"

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> str:
        return "check"


class Check(Node):
    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> str:
        shared["rounds"] = shared.get("rounds", 0) + 1
        return "revise" if shared["rounds"] < 2 else HOSTILE


class Publish(Node):
    """A node whose name is markup, reached by an action that is markup."""

    name = HOSTILE

    def exec(self, prep_res: Any) -> str:
        raise RuntimeError(f"cannot publish {HOSTILE}")


class Archive(Node):
    """Never reached: drawn from the flow's own graph only."""


def review_flow() -> Flow:
    draft, check, publish = Draft(), Check(), Publish()
    draft - "check" >> check
    check - "revise" >> draft
    check - HOSTILE >> publish
    check - "shelve" >> Archive()
    flow = Flow(start=draft)
    flow.name = "review"
    return flow


class Fetch(Node):
    def exec(self, prep_res: Any) -> int:
        return 1


class Slow(Node):
    def exec(self, prep_res: Any) -> int:
        print("in slow", flush=True)
        time.sleep(120)
        return 2


class Save(Node):
    pass


def crashing_flow() -> Flow:
    fetch = Fetch()
    fetch >> Slow() >> Save()
    flow = Flow(start=fetch)
    flow.name = "crashing"
    return flow


@sw.policy
async def weather(city: str) -> str:
    """The weather in ``city``."""
    await asyncio.sleep(0.3)
    return f"sunny in {city}"


trio = llm.Agent(
    ScriptedLLM(
        [
            [call("weather", city=c) for c in ("Paris", "Oslo", HOSTILE)],
            "Sunny everywhere.",
        ]
    ),
    instructions="Answer with the weather.",
    tools=[weather],
    name="trio",
)


@sw.policy
async def napper(ctx: sw.Context) -> str:
    """Sleep a little, then wait for a signal whose name is markup."""
    await ctx.sleep(0.2)
    return str(await ctx.wait_for(HOSTILE))


@sw.policy
async def branch(ctx: sw.Context, name: str) -> list[str]:
    """Greet two names made of ``name``, each in a child run."""
    return list(await ctx.map(greet, [f"{name}1", f"{name}2"]))


@sw.policy
async def tree_root(ctx: sw.Context) -> list[list[str]]:
    """Two branches, each a child run with two children of its own."""
    return list(await ctx.map(branch, ["a", "b"]))


review = review_flow()
crashing = crashing_flow()
POLICIES = [review, crashing, trio, weather, napper, greet, branch, tree_root]


async def seed(url: str) -> None:
    """The flow that fails in its markup-named node, the agent, and a run
    that slept and waited, a run whose children have children."""
    async with sw.Runner(url, policies=POLICIES) as r:
        with contextlib.suppress(Exception):
            await r.run(review, shared={}, run_id="review-1")
        await r.run(trio, "Weather in three cities?", run_id="trio-1")
        napping = await r.start(napper, run_id="napper-1")
        while (await r.store.get_run("napper-1")).status != "suspended":  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        await r.signal("napper-1", HOSTILE, "awake")
        await napping.result()
        await r.run(tree_root, run_id="tree")


async def crash(url: str) -> None:
    """Run ``crashing`` until a test kills this process in ``Slow``."""
    async with sw.Runner(url, policies=POLICIES) as r:
        await r.run(crashing, shared={}, run_id="crashing-1")


if __name__ == "__main__":
    assert sys.argv[2] == "crash"
    asyncio.run(crash(sys.argv[1]))
