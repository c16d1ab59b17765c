"""A program whose run calls a remote A2A agent as a tool, then pauses in a
slow step (where a test kills it): ``python caller_program.py STORE URL MARK``.
It prints ``RESULT <value>`` when its run ends."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import stalwart as sw
from stalwart import a2a

STORE, URL, MARK = sys.argv[1:4]

shouter = a2a.remote_agent(URL, name="shouter", description="Shouts back.")


def _mark() -> None:
    Path(MARK).write_text("called")


@sw.policy
async def pause() -> None:
    """Marks that the remote call finished, then takes a while."""
    _mark()
    await asyncio.sleep(float(os.environ.get("A2A_SLOW", "0")))


@sw.policy
async def caller(ctx: sw.Context, question: str) -> str:
    """Asks the remote agent, then pauses."""
    answer = await shouter(question=question)
    await pause()
    return f"remote said {answer}"


async def main() -> None:
    async with sw.Runner(STORE, policies=[caller]) as runner:
        result = await runner.run(caller, question="hello", run_id="caller-1")
    print("RESULT", result, flush=True)


asyncio.run(main())
