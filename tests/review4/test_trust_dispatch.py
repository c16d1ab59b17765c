"""Trust review of the options dispatch (core/engine/dispatch.py).

* Two calls of one model reply with the same id both ran: the model could
  not tell their results apart. Now the first runs and the duplicate's
  result is a ``DuplicateCallId`` error naming the id and both steps; keys
  stay positional, so a replay is the same.
* Two named exclusive locks taken in opposite orders by calls of one run
  (X holding "a" asks for "b" while Y holding "b" asks for "a") waited for
  ever. Now the call that would close the cycle is refused with an
  ``ExclusiveDeadlock`` error naming both locks and its step.

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


@sw.policy
async def note(label: str) -> str:
    """Note a label.

    Args:
        label: What to note.
    """
    RAN.append(label)
    return f"noted {label}"


@sw.policy
async def twice_same_id(ctx: sw.Context) -> list[Message]:
    llm: Any = ScriptedLLM(
        [
            [
                call("note", "same", label="a"),
                call("note", "same", label="b"),
                call("note", label="c"),
            ]
        ],
        name="dup_model",
    )
    out: list[Message] = await ctx.call(llm, observations=[Message.user("go")], options=[note])
    return out


def _results(out: list[Message]) -> list[tuple[str, str]]:
    return [
        (r.call_id, f"{r.error_type}: {r.error_message}" if r.is_error else str(r.value))
        for m in out
        if (r := m.action_result) is not None
    ]


def test_a_duplicate_call_id_is_not_run_and_says_why(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dup.db'}"
    RAN.clear()
    out = sw.Runner(url).run_sync(twice_same_id, run_id="dup")
    assert sorted(RAN) == ["a", "c"]  # the duplicate did not run
    results = _results(out)
    assert [r[0] for r in results[:2]] == ["same", "same"]
    assert results[0][1] == "noted a"
    error = results[1][1]
    assert error.startswith("DuplicateCallId: call id 'same' of 'note' (step 1#2)")
    assert "step 1#1" in error
    assert results[2][1] == "noted c"
    # Replayed, the same messages, nothing run again.
    RAN.clear()
    again = sw.Runner(url).run_sync(twice_same_id, run_id="dup")
    assert RAN == []
    assert _results(again) == results


# -- locks taken in opposite orders -------------------------------------------------

READY: dict[str, asyncio.Event] = {}


def _inner(name: str, tool: str, options: list[Any]) -> Any:
    async def ask(ctx: sw.Context) -> str:
        llm: Any = ScriptedLLM([[call(tool)]], name=name)
        out = await ctx.call(llm, observations=[Message.user("go")], options=options)
        [r] = [m.action_result for m in out if m.action_result is not None]
        return f"{r.error_type}: {r.error_message}" if r.is_error else str(r.value)

    return ask


@sw.policy(exclusive="a")
async def x_inner() -> str:
    """Needs lock a."""
    return "x_inner ran"


@sw.policy(exclusive="b")
async def y_inner() -> str:
    """Needs lock b."""
    return "y_inner ran"


@sw.policy(exclusive="a")
async def x_outer(ctx: sw.Context) -> str:
    """Holds lock a, then asks for a tool needing lock b."""
    READY["a"].set()
    await READY["b"].wait()
    return str(await _inner("x_model", "y_inner", [y_inner])(ctx))


@sw.policy(exclusive="b")
async def y_outer(ctx: sw.Context) -> str:
    """Holds lock b, then asks for a tool needing lock a."""
    READY["b"].set()
    await READY["a"].wait()
    return str(await _inner("y_model", "x_inner", [x_inner])(ctx))


@sw.policy
async def crossing(ctx: sw.Context) -> list[Message]:
    READY.update(a=asyncio.Event(), b=asyncio.Event())
    llm: Any = ScriptedLLM([[call("x_outer"), call("y_outer")]], name="crossing_model")
    out: list[Message] = await ctx.call(
        llm, observations=[Message.user("go")], options=[x_outer, y_outer]
    )
    return out


async def test_locks_taken_in_opposite_orders_fail_one_call_instead_of_hanging(
    tmp_path: Path,
) -> None:
    async with sw.Runner(f"sqlite:///{tmp_path / 'locks.db'}") as runner:
        # A bound on a hang only: the run needs no waiting at all.
        out = await asyncio.wait_for(runner.run(crossing, run_id="crossing"), 60)
    results = [text for _, text in _results(out)]
    refused = [t for t in results if t.startswith("ExclusiveDeadlock")]
    assert len(refused) == 1, results
    [text] = refused
    assert "lock 'a'" in text and "lock 'b'" in text
    assert "(step 1#1.1#1)" in text or "(step 1#2.1#1)" in text
    # The other call got its lock once the refused one's caller let go.
    assert "x_inner ran" in results or "y_inner ran" in results


@sw.policy(exclusive="a")
async def a_then_b(ctx: sw.Context) -> str:
    """Holds lock a, then asks for lock b (no one holds it the other way)."""
    return str(await _inner("ab_model", "y_inner", [y_inner])(ctx))


@sw.policy
async def same_order(ctx: sw.Context) -> list[Message]:
    llm: Any = ScriptedLLM([[call("a_then_b"), call("a_then_b")]], name="same_order_model")
    out: list[Message] = await ctx.call(llm, observations=[Message.user("go")], options=[a_then_b])
    return out


def test_locks_taken_in_one_order_wait_and_all_run() -> None:
    out = sw.Runner().run_sync(same_order, run_id="same")
    assert [text for _, text in _results(out)] == ["y_inner ran", "y_inner ran"]
