"""A run whose root policy is offered ``options``: the action calls of the
root's reply run as steps of the run, keyed below the root, and the root
itself is never recorded as a step, on every store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import Message


@sw.policy
async def add(a: int, b: int) -> int:
    return a + b


@sw.policy(name="planner")
async def planner(topic: str, *, options: Sequence[Any] = ()) -> list[Message]:
    return [Message.call("add", {"a": len(topic), "b": 1}, id="c1")]


async def test_a_root_offered_options_runs_the_action_calls_of_its_reply(
    any_store_url: str,
) -> None:
    async with sw.Runner(any_store_url, policies=[planner, add]) as runner:
        out = await runner.run(planner, "four", options=["add"], run_id="root")
        steps = await runner.steps("root")
        again = await runner.run(planner, "four", options=["add"], run_id="root")
    call, result = out
    assert call.action_call is not None and call.action_call.arguments == {"a": 4, "b": 1}
    assert result.action_result is not None
    assert (result.action_result.call_id, result.action_result.value) == ("c1", 5)
    assert again == out
    if any_store_url != "memory":
        assert [(s.key, s.name, s.args) for s in steps] == [("#1", "add", '{"a":4,"b":1}')]
