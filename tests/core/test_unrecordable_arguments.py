"""A step whose arguments cannot be recorded fails with an error naming the
step and the run (S11, S14): on a worker running many runs, the step key
alone does not say which run to look at."""

from __future__ import annotations

import asyncio
from typing import Any

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


async def test_an_unrecordable_argument_names_step_and_run(sqlite_url: str) -> None:
    @sw.policy
    async def main(ctx: sw.Context) -> str:
        await ctx.call(takes, "fine")
        return await ctx.call(takes, Opaque())

    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(main, run_id="opaque-1")
    assert str(caught.value).startswith("arguments of run 'opaque-1', step 2['*'][0]: ")
    assert "Opaque cannot be recorded as JSON" in str(caught.value)


async def test_a_non_finite_number_names_step_and_run(sqlite_url: str) -> None:
    @sw.policy
    async def main(ctx: sw.Context) -> str:
        return await ctx.call(takes, float("nan"))

    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(main, run_id="nan-1")
    assert str(caught.value).startswith("arguments of run 'nan-1', step 1: ")


async def test_an_unrecordable_item_of_a_growing_list_names_step_and_run(sqlite_url: str) -> None:
    """A list argument that extends an earlier step's is encoded item by item
    (what is new only): its error names the run all the same."""
    history: list[object] = [f"turn {i}: {'x' * 40}" for i in range(4)]

    @sw.policy
    async def main(ctx: sw.Context) -> str:
        await ctx.call(takes_list, list(history))
        return await ctx.call(takes_list, [*history, Opaque()])

    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(main, run_id="list-1")
    assert str(caught.value).startswith("arguments of run 'list-1', step 2")
    assert "Opaque cannot be recorded as JSON" in str(caught.value)


# Arguments that cannot be recorded name the run as well as the step, in
# the engine's other recorded calls too (S5, S14): a message sent or a
# receive's filters (``ctx.send``, ``ctx.receive``), and a unit read back
# without the event loop (``Engine.replayed_unit``). On a worker executing
# many runs the step key alone does not say which run to look at.


async def _until(runner: sw.Runner, run_id: str, status: str) -> None:
    for _ in range(1000):
        if (await runner.get_run(run_id)).status == status:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never became {status}")


@sw.policy
async def sends_the_unrecordable(ctx: sw.Context) -> str:
    return await ctx.send("anyone", {"body": Opaque()})


@sw.policy
async def receives_by_an_unrecordable_sender(ctx: sw.Context) -> Any:
    return await ctx.receive(sender=Opaque())  # type: ignore[arg-type]


async def test_an_unrecordable_message_names_the_run_and_step(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(sends_the_unrecordable, run_id="send-1")
    assert str(caught.value).startswith("arguments of run 'send-1', step 1['payload']['body']: ")
    assert "Opaque cannot be recorded as JSON" in str(caught.value)


async def test_an_unrecordable_receive_filter_names_the_run_and_step(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(receives_by_an_unrecordable_sender, run_id="recv-1")
    assert str(caught.value).startswith("arguments of run 'recv-1', step 2['sender']: ")


async def _five(unit: sw.Context) -> int:
    return 5


@sw.policy
async def reads_a_unit_back_with_other_arguments(ctx: sw.Context) -> Any:
    engine = ctx.engine
    key = ctx.next_key()
    await engine.run_unit(key, "demo.unit", _five, {"v": 5})
    await ctx.wait_for("go")  # what follows runs after a replay of the unit
    return await asyncio.to_thread(engine.replayed_unit, key, "demo.unit", {"v": Opaque()})


async def test_a_unit_read_back_with_unrecordable_arguments_names_the_run(
    sqlite_url: str,
) -> None:
    policies = [reads_a_unit_back_with_other_arguments]
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=policies) as runner:
        handle = await runner.start(reads_a_unit_back_with_other_arguments, run_id="unit-1")
        await _until(runner, "unit-1", "suspended")
        await runner.signal("unit-1", "go", 1)
        with pytest.raises(sw.SerializationError) as caught:
            await handle.result(timeout=10)
    assert str(caught.value).startswith("arguments of run 'unit-1', step 1['v']: ")
