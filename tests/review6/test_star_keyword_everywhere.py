"""A keyword argument named "*" is refused in memory as it is on a store.

The ledger records positional arguments under "*", so a durable run refuses
a keyword of that name (S5). A run in memory must refuse it too, with the
same error: a program that works in memory must not start failing the day
it is given a store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw


@sw.policy
async def echo(*args: Any, **kwargs: Any) -> str:
    return repr((args, kwargs))


@sw.policy
async def through_ctx(ctx: sw.Context) -> str:
    return await ctx.call(echo, 1, **{"*": [2]})


@sw.policy
async def through_call() -> str:
    await echo(0)  # step 1: fine
    return await echo(1, **{"*": [2]})  # step 2


def _stores(tmp_path: Path) -> list[str | None]:
    return [None, f"sqlite:///{tmp_path / 'r.db'}"]


@pytest.mark.parametrize("main", [through_ctx, through_call], ids=["ctx.call", "policy()"])
async def test_memory_and_sqlite_refuse_it_alike(tmp_path: Path, main: Any) -> None:
    errors = []
    for store in _stores(tmp_path):
        async with sw.Runner(store) as runner:
            with pytest.raises(sw.SerializationError) as caught:
                await runner.run(main, run_id="star-1")
        errors.append(str(caught.value))
    step = "1" if main is through_ctx else "2"
    expected = (
        f"arguments of run 'star-1', step {step}: a keyword argument may not be named '*' "
        "(the ledger records positional arguments under that name)"
    )
    assert errors == [expected, expected]


async def test_a_watched_run_in_memory_refuses_it_too() -> None:
    """A run someone listens to takes the engine's full path, not the bare
    call: the same rule, the same error."""
    async with sw.Runner() as runner:
        handle = await runner.start(through_ctx, run_id="star-2")
        with pytest.raises(sw.SerializationError, match=r"^arguments of run 'star-2', step 1: "):
            async with asyncio.timeout(10):
                await handle.result()


async def test_ordinary_keywords_still_pass_in_memory() -> None:
    @sw.policy
    async def main(ctx: sw.Context) -> str:
        return await ctx.call(echo, 1, x=2, **{"*x": 3})

    async with sw.Runner() as runner:
        assert await runner.run(main) == repr(((1,), {"x": 2, "*x": 3}))
