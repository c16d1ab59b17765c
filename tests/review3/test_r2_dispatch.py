"""Adversarial review of the options dispatch: an ``exclusive`` lock belongs
to one run's execution, so a child run started from inside a call that holds
it takes its own lock: it is neither refused as re-entry nor held back."""

from __future__ import annotations

from typing import Any

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM, call


@sw.policy(exclusive="calendar")
async def r2_cancel(slot: str) -> str:
    """Cancel a booking.

    Args:
        slot: The slot.
    """
    return f"cancelled {slot}"


@sw.policy
async def r2_helper(ctx: sw.Context, slot: str) -> str:
    """A helper run whose model clears the slot with the calendar tool."""
    llm: Any = ScriptedLLM([[call("r2_cancel", slot=slot)]], name="r2_helper_model")
    out = await ctx.call(llm, observations=[Message.user(slot)], options=[r2_cancel])
    [r] = [m.action_result for m in out if m.action_result is not None]
    return f"{r.error_type}: {r.error_message}" if r.is_error else str(r.value)


@sw.policy(exclusive="calendar")
async def r2_book(ctx: sw.Context, slot: str) -> str:
    """Book a slot, after a child run has cleared it.

    Args:
        slot: The slot.
    """
    child = await ctx.spawn(r2_helper, slot=slot)
    cleared: str = await child.result()
    return f"{cleared}; booked {slot}"


@sw.policy
async def r2_desk(ctx: sw.Context) -> list[Message]:
    llm: Any = ScriptedLLM([[call("r2_book", slot="9:00")]], name="r2_desk_model")
    out: list[Message] = await ctx.call(llm, observations=[Message.user("go")], options=[r2_book])
    return out


def test_a_child_run_started_inside_an_exclusive_call_takes_its_own_lock() -> None:
    runner = sw.Runner(policies=[r2_desk, r2_helper])
    out = runner.run_sync(r2_desk, run_id="desk")
    results = [m.action_result.value for m in out if m.action_result is not None]
    assert results == ["cancelled 9:00; booked 9:00"]
