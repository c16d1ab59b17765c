"""A step whose arguments cannot be recorded fails with an error naming the
step and the run (S11, S14): on a worker running many runs, the step key
alone does not say which run to look at."""

from __future__ import annotations

from pathlib import Path

import pytest

import stalwart as sw


class Opaque:
    """A value the ledger has no JSON for."""


@sw.policy
async def takes(value: object) -> str:
    return "never"


@sw.policy
async def takes_list(history: list[object]) -> str:
    return "never"


async def test_an_unrecordable_argument_names_step_and_run(tmp_path: Path) -> None:
    @sw.policy
    async def main(ctx: sw.Context) -> str:
        await ctx.call(takes, "fine")
        return await ctx.call(takes, Opaque())

    async with sw.Runner(f"sqlite:///{tmp_path / 'r.db'}") as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(main, run_id="opaque-1")
    assert str(caught.value).startswith("arguments of run 'opaque-1', step 2['*'][0]: ")
    assert "Opaque cannot be recorded as JSON" in str(caught.value)


async def test_a_non_finite_number_names_step_and_run(tmp_path: Path) -> None:
    @sw.policy
    async def main(ctx: sw.Context) -> str:
        return await ctx.call(takes, float("nan"))

    async with sw.Runner(f"sqlite:///{tmp_path / 'r.db'}") as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(main, run_id="nan-1")
    assert str(caught.value).startswith("arguments of run 'nan-1', step 1: ")


async def test_an_unrecordable_item_of_a_growing_list_names_step_and_run(tmp_path: Path) -> None:
    """A list argument that extends an earlier step's is encoded item by item
    (what is new only): its error names the run all the same."""
    history: list[object] = [f"turn {i}: {'x' * 40}" for i in range(4)]

    @sw.policy
    async def main(ctx: sw.Context) -> str:
        await ctx.call(takes_list, list(history))
        return await ctx.call(takes_list, [*history, Opaque()])

    async with sw.Runner(f"sqlite:///{tmp_path / 'r.db'}") as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(main, run_id="list-1")
    assert str(caught.value).startswith("arguments of run 'list-1', step 2")
    assert "Opaque cannot be recorded as JSON" in str(caught.value)
