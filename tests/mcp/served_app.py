"""Policies served as MCP tools by the server tests (a real `serve` process).

Run as ``python served_app.py --store URL [--http HOST:PORT]``: exactly what
``stalwart mcp serve --app served_app`` does. ``stage`` appends to the file
in $APP_COUNT each time it really runs; stage 2 blocks while $APP_BLOCK
exists, after writing the server's pid next to it (a test SIGKILLs it).
"""

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import stalwart as sw
from stalwart import mcp


@sw.policy
async def stage(job: str, n: int) -> str:
    with open(os.environ["APP_COUNT"], "a") as f:
        f.write(f"{job}:{n}\n")
    block = os.environ.get("APP_BLOCK")
    if n == 2 and block:
        Path(block + ".started").write_text(str(os.getpid()))  # noqa: ASYNC240
        while Path(block).exists():  # noqa: ASYNC240
            await asyncio.sleep(0.02)
    return f"{job}-{n}-at-{time.time()}"


@mcp.tool
@sw.policy
async def add(a: int, b: int = 1) -> dict[str, int]:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return {"sum": a + b}


@mcp.tool(name="long_job")
@sw.policy
async def job(ctx: sw.Context, name: str) -> str:
    """A job of two recorded stages that reports progress.

    Args:
        name: What to call the job.
    """
    first = await ctx.call(stage, name, 1)
    ctx.emit({"progress": 1, "total": 2, "message": "stage 1 done"})
    second = await ctx.call(stage, name, 2)
    ctx.emit({"progress": 2, "total": 2, "message": "stage 2 done"})
    return f"{first} {second}"


@mcp.tool
@sw.policy
async def refuse(why: str) -> str:
    """Always fails."""
    raise PermissionError(f"refused: {why}")


@mcp.tool
@sw.policy
async def approve(ctx: sw.Context, amount: int) -> str:
    """Pay out an amount once a person approves it.

    Args:
        amount: How much to pay.
    """
    decision = await ctx.ask(f"Pay {amount}?", signal="approval", about={"amount": amount})
    return f"paid {amount}" if decision is True else f"not paid: {decision}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store")
    parser.add_argument("--http")
    args = parser.parse_args()
    asyncio.run(mcp.serve(sys.modules[__name__], store=args.store, http=args.http))
