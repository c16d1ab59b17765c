"""Review 5 of the exclusive-lock deadlock detection (core/engine/dispatch.py).

* A call whose result is recorded is checked for a deadlock before its
  record is looked at: on replay, when the locks happen to be held the
  crossing way, the recorded call is refused with ``ExclusiveDeadlock``
  instead of returning its recorded result (S2), and the run goes on from
  a different history than the one it recorded.
* A call holding an exclusive lock waits for a ``max_parallel`` slot, held
  by a call that waits for that lock: a hang the wait-for graph does not see.

Real SQLite files, a real runner; no mocks.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM, call

RAN: list[str] = []
EV: dict[str, asyncio.Event] = {}
PHASE = {"n": 1}


def _texts(out: list[Message]) -> list[str]:
    return [
        f"{r.error_type}: {r.error_message}" if r.is_error else str(r.value)
        for m in out
        if (r := m.action_result) is not None
    ]


async def _ask(ctx: sw.Context, name: str, tool: str, options: list[Any]) -> str:
    llm: Any = ScriptedLLM([[call(tool)]], name=name)
    out = await ctx.call(llm, observations=[Message.user("go")], options=options)
    [text] = _texts(out)
    return text


# -- a recorded call refused on replay ----------------------------------------------


@sw.policy(exclusive="b")
async def r5_y_inner() -> str:
    """Needs lock b."""
    RAN.append("y_inner")
    return "y_inner ran"


@sw.policy(exclusive="a")
async def r5_x_inner() -> str:
    """Needs lock a."""
    RAN.append("x_inner")
    return "x_inner ran"


@sw.policy(exclusive="a")
async def r5_x_outer(ctx: sw.Context) -> str:
    """Holds lock a; asks for a tool needing lock b."""
    if PHASE["n"] == 2:
        await EV["b_held"].wait()
        await asyncio.sleep(0.5)  # order only: y_mid is now waiting for lock a
    text = await _ask(ctx, "r5_x_model", "r5_y_inner", [r5_y_inner])
    if PHASE["n"] == 1:
        EV["x_done"].set()
        await asyncio.sleep(3600)  # the process dies here
    return text


@sw.policy(exclusive="b")
async def r5_y_mid(ctx: sw.Context) -> str:
    """Holds lock b; asks for a tool needing lock a."""
    EV["b_held"].set()
    return await _ask(ctx, "r5_mid_model", "r5_x_inner", [r5_x_inner])


@sw.policy
async def r5_y_outer(ctx: sw.Context) -> str:
    """No lock; asks for y_mid (lock b), after x_outer's inner call the first time."""
    if PHASE["n"] == 1:
        await EV["x_done"].wait()
    return await _ask(ctx, "r5_y_model", "r5_y_mid", [r5_y_mid])


@sw.policy
async def r5_top(ctx: sw.Context) -> list[str]:
    llm: Any = ScriptedLLM([[call("r5_x_outer"), call("r5_y_outer")]], name="r5_top_model")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[r5_x_outer, r5_y_outer])
    return _texts(out)


async def test_a_recorded_call_replays_its_result_even_when_the_locks_cross(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'replay.db'}"
    RAN.clear()
    PHASE["n"] = 1
    EV.update(x_done=asyncio.Event(), b_held=asyncio.Event())
    runner = sw.Runner(url)
    await runner.start(r5_top, run_id="cross")
    await asyncio.wait_for(EV["x_done"].wait(), 30)
    await asyncio.wait_for(EV["b_held"].wait(), 30)
    await asyncio.sleep(0.3)  # y_mid's model step is recorded
    await runner.close()  # handed back unfinished, as after a crash
    assert RAN == ["y_inner"]  # recorded at step 1#1.1#1

    PHASE["n"] = 2
    EV.update(x_done=asyncio.Event(), b_held=asyncio.Event())
    async with sw.Runner(url) as fresh:
        handle = await fresh.start(r5_top, run_id="cross")
        texts = await asyncio.wait_for(handle.result(60), 60)
    # x_outer's inner call is recorded: its result is the recorded one.
    assert texts[0] == "y_inner ran", texts
    assert RAN.count("y_inner") == 1


# -- a lock holder waiting for a parallelism slot ---------------------------------


@sw.policy(exclusive="b")
async def r5_b_leaf() -> str:
    """Needs lock b."""
    return "b_leaf ran"


@sw.policy(exclusive="a")
async def r5_a_holder(ctx: sw.Context) -> str:
    """Holds lock a; lets b_holder start; asks for a tool needing lock b."""
    for _ in range(3):
        await asyncio.sleep(0)  # b_holder takes lock b, then waits for a slot
    return await _ask(ctx, "r5_a_model", "r5_b_leaf", [r5_b_leaf])


@sw.policy(exclusive="b")
async def r5_b_holder() -> str:
    """Holds lock b, asks for nothing."""
    return "b_holder ran"


@sw.policy
async def r5_slots(ctx: sw.Context) -> list[str]:
    llm: Any = ScriptedLLM([[call("r5_a_holder"), call("r5_b_holder")]], name="r5_slots_model")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[r5_a_holder, r5_b_holder])
    return _texts(out)


async def test_without_a_parallelism_limit_the_calls_all_run() -> None:
    async with sw.Runner() as runner:
        texts = await asyncio.wait_for(runner.run(r5_slots, run_id="free"), 60)
    assert texts == ["b_leaf ran", "b_holder ran"]


async def test_a_lock_holder_waiting_for_a_slot_does_not_hang() -> None:
    async with sw.Runner(max_parallel=1) as runner:
        # A bound on a hang only: the run needs no waiting at all.
        texts = await asyncio.wait_for(runner.run(r5_slots, run_id="slots"), 10)
    assert texts == ["b_leaf ran", "b_holder ran"]
