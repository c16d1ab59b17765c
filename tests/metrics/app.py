"""The policies a metrics test's worker executes (``stalwart worker --app``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import stalwart as sw


@sw.policy
async def double(x: int) -> int:
    return x * 2


@sw.policy
async def greet(name: str) -> str:
    return f"{name} {await double(len(name))}"


@sw.policy
async def refuse(name: str) -> str:
    raise ValueError(f"no {name}")


# A policy's name is data, and so is what it makes a label value.
@sw.policy(name='odd "name"\nhere\\')
async def odd(x: int) -> int:
    return await double(x)


@sw.policy
async def held(gate: str) -> int:
    """One recorded step, then a mark on disk, then waits for ``gate`` to exist."""
    first = await double(21)
    Path(gate + ".reached").write_text("")  # noqa: ASYNC240
    while not Path(gate).exists():  # noqa: ASYNC240
        await asyncio.sleep(0.02)
    return first


@sw.policy
async def metrics_imported() -> bool:
    """Whether the worker executing it imported prometheus_client."""
    return "prometheus_client" in sys.modules
