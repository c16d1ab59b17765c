"""``ctx.spawn_many``'s calls are ``(args, kwargs)`` pairs: anything else is
refused before a child starts, naming the run, the step and the call."""

from __future__ import annotations

from typing import Any

import pytest

import stalwart as sw


@sw.policy
async def echo(word: str, times: int = 1) -> str:
    return word * times


@sw.policy
async def starts(ctx: sw.Context, calls: list[Any]) -> list[str]:
    return list(await ctx.results(await ctx.spawn_many(echo, calls)))


async def test_pairs_of_arguments_start_one_child_each() -> None:
    runner = sw.Runner()
    calls = [[["ab"], {}], (("c",), {"times": 3}), ([], {"word": "d"})]
    assert await runner.run(starts, calls) == ["ab", "ccc", "d"]


@pytest.mark.parametrize(
    ("call", "shown"),
    [
        (["hello", {}], r"\['hello', \{\}\]"),  # a string is not a sequence of arguments
        (1, "1"),
        ([["x"], ["times", 2]], r"\[\['x'\], \['times', 2\]\]"),  # keywords not a mapping
        ([["x"], {}, {}], r"\[\['x'\], \{\}, \{\}\]"),
    ],
)
async def test_a_call_that_is_not_a_pair_is_refused_naming_it(call: Any, shown: str) -> None:
    runner = sw.Runner()
    with pytest.raises(TypeError, match=rf"run 'r', step 1: call 1 of spawn_many is {shown};"):
        await runner.run(starts, [[["ok"], {}], call], run_id="r")
