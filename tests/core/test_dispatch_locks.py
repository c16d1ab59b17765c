"""Per-tool locks: an ``exclusive`` option runs one call at a time within a run.

Concurrency is observed, not timed: each tool counts the calls running at
once and yields to the event loop a few times, so that calls the engine
started together overlap unless something holds them apart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.core.engine.locks import LockTable
from stalwart.testing import ScriptedLLM, call

from ._support import ask_for, result_texts


class Gauge:
    """The most calls seen running at once, per lock."""

    def __init__(self) -> None:
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.order: list[str] = []

    async def hold(self, lock: str, label: str) -> None:
        self.now[lock] = self.now.get(lock, 0) + 1
        self.peak[lock] = max(self.peak.get(lock, 0), self.now[lock])
        self.order.append(f"start {label}")
        for _ in range(5):
            await asyncio.sleep(0)
        self.order.append(f"end {label}")
        self.now[lock] -= 1


GAUGE = Gauge()


@sw.policy(exclusive=True)
async def pay(label: str) -> str:
    """Pay.

    Args:
        label: Which payment.
    """
    await GAUGE.hold("pay", label)
    return f"paid {label}"


@sw.policy
async def pay_freely(label: str) -> str:
    """Pay, with no lock.

    Args:
        label: Which payment.
    """
    await GAUGE.hold("free", label)
    return f"paid {label}"


@sw.policy(exclusive="calendar")
async def book(slot: str) -> str:
    """Book a slot.

    Args:
        slot: The slot.
    """
    await GAUGE.hold("calendar", f"book {slot}")
    return f"booked {slot}"


@sw.policy(exclusive="calendar")
async def cancel(slot: str) -> str:
    """Cancel a slot.

    Args:
        slot: The slot.
    """
    await GAUGE.hold("calendar", f"cancel {slot}")
    return f"cancelled {slot}"


def one_turn(*calls: Message, name: str = "model") -> ScriptedLLM:
    return ScriptedLLM([list(calls)], name=name)


def run_once(llm: Any, options: list[Any], url: str | None = None) -> list[Message]:
    @sw.policy
    async def agent(ctx: sw.Context) -> list[Message]:
        out: list[Message] = await ctx.call(llm, observations=[Message.user("go")], options=options)
        return out

    runner = sw.Runner(url) if url else sw.Runner()
    result: list[Message] = runner.run_sync(agent, run_id="r")
    return result


def texts(messages: list[Message]) -> list[str]:
    return [str(m.action_result.value) for m in messages if m.action_result is not None]


@pytest.fixture(autouse=True)
def fresh_gauge() -> None:
    global GAUGE
    GAUGE = Gauge()


def test_parallel_calls_of_an_exclusive_tool_run_one_at_a_time() -> None:
    llm = one_turn(call("pay", label="a"), call("pay", label="b"), call("pay", label="c"))
    out = run_once(llm, [pay])
    assert GAUGE.peak["pay"] == 1
    assert GAUGE.order == ["start a", "end a", "start b", "end b", "start c", "end c"]
    assert texts(out) == ["paid a", "paid b", "paid c"]  # results in call order


def test_without_the_lock_the_same_calls_overlap() -> None:
    """The control: what the gauge sees when nothing holds the calls apart."""
    llm = one_turn(
        call("pay_freely", label="a"), call("pay_freely", label="b"), call("pay_freely", label="c")
    )
    run_once(llm, [pay_freely])
    assert GAUGE.peak["free"] == 3


def test_a_lock_named_by_several_tools_is_shared_and_other_tools_run_beside_it() -> None:
    llm = one_turn(
        call("book", slot="9:00"),
        call("cancel", slot="10:00"),
        call("pay_freely", label="x"),
        call("pay_freely", label="y"),
    )
    out = run_once(llm, [book, cancel, pay_freely])
    assert GAUGE.peak["calendar"] == 1  # book and cancel never overlap
    assert GAUGE.peak["free"] == 2  # the unlocked tool was not held back
    assert texts(out) == ["booked 9:00", "cancelled 10:00", "paid x", "paid y"]


def test_the_lock_holds_across_sub_agents_running_in_parallel_in_one_run() -> None:
    first = one_turn(call("pay", label="first"), name="first_model")
    second = one_turn(call("pay", label="second"), name="second_model")

    @sw.policy
    async def both(ctx: sw.Context) -> list[list[Message]]:
        go = [Message.user("go")]
        return list(
            await asyncio.gather(
                ctx.call(first, observations=go, options=[pay]),
                ctx.call(second, observations=go, options=[pay]),
            )
        )

    sw.Runner().run_sync(both)
    assert GAUGE.peak["pay"] == 1


def test_the_lock_leaves_keys_unchanged_and_a_replay_answers_from_the_ledger(
    tmp_path: Path,
) -> None:
    """S1: keys are taken in call order before any call waits for the lock,
    so a run recorded with the lock has the keys it would have without it."""
    calls = [call("pay", label="a"), call("pay", label="b")]
    locked = tmp_path / "locked.db"
    run_once(one_turn(*calls), [pay], f"sqlite:///{locked}")
    free = tmp_path / "free.db"
    run_once(
        one_turn(call("pay_freely", label="a"), call("pay_freely", label="b")),
        [pay_freely],
        f"sqlite:///{free}",
    )

    async def keys(path: Path) -> list[str]:
        async with sw.Runner(f"sqlite:///{path}", serving=False) as runner:
            return sorted(s.key for s in await runner.steps("r"))

    assert asyncio.run(keys(locked)) == asyncio.run(keys(free)) == ["1", "1#1", "1#2"]
    GAUGE.order.clear()
    again = run_once(one_turn(*calls), [pay], f"sqlite:///{locked}")  # same run id: replayed
    assert GAUGE.order == []  # nothing ran again
    assert texts(again) == ["paid a", "paid b"]


@sw.policy(exclusive=True)
async def delegate(ctx: sw.Context, task: str) -> str:
    """Hand a task to a helper model that may call tools, this one included.

    Args:
        task: The task.
    """
    helper = ScriptedLLM([[call("delegate", task="again")]], name="helper")
    out = await ctx.call(helper, observations=[Message.user(task)], options=[delegate])
    [result] = [m.action_result for m in out if m.action_result is not None]
    return f"{result.error_type}: {result.error_message}"


def test_an_exclusive_tool_called_from_inside_its_own_call_is_refused_not_hung() -> None:
    out = run_once(one_turn(call("delegate", task="first")), [delegate])
    [text] = texts(out)
    assert text.startswith("ExclusiveReentry: 'delegate' is exclusive")
    assert "wait for itself" in text


@pytest.mark.parametrize("bad", ["", 3, None])
def test_exclusive_is_true_false_or_a_lock_name(bad: Any) -> None:
    async def tool() -> None:
        return None

    with pytest.raises(ValueError, match="exclusive must be"):
        sw.policy(exclusive=bad)(tool)


def test_exclusive_is_a_setting_a_copy_keeps() -> None:
    assert pay.with_settings(timeout=5).exclusive is True
    assert book.settings()["exclusive"] == "calendar"


# An ``exclusive`` lock belongs
# to one run's execution, so a child run started from inside a call that holds
# it takes its own lock: it is neither refused as re-entry nor held back.


@sw.policy(exclusive="calendar")
async def spawned_cancel(slot: str) -> str:
    """Cancel a booking.

    Args:
        slot: The slot.
    """
    return f"cancelled {slot}"


@sw.policy
async def spawned_helper(ctx: sw.Context, slot: str) -> str:
    """A helper run whose model clears the slot with the calendar tool."""
    llm: Any = ScriptedLLM([[call("spawned_cancel", slot=slot)]], name="spawned_helper_model")
    out = await ctx.call(llm, observations=[Message.user(slot)], options=[spawned_cancel])
    [r] = [m.action_result for m in out if m.action_result is not None]
    return f"{r.error_type}: {r.error_message}" if r.is_error else str(r.value)


@sw.policy(exclusive="calendar")
async def spawned_book(ctx: sw.Context, slot: str) -> str:
    """Book a slot, after a child run has cleared it.

    Args:
        slot: The slot.
    """
    child = await ctx.spawn(spawned_helper, slot=slot)
    cleared: str = await child.result()
    return f"{cleared}; booked {slot}"


@sw.policy
async def spawned_desk(ctx: sw.Context) -> list[Message]:
    llm: Any = ScriptedLLM([[call("spawned_book", slot="9:00")]], name="spawned_desk_model")
    out: list[Message] = await ctx.call(
        llm, observations=[Message.user("go")], options=[spawned_book]
    )
    return out


def test_a_child_run_started_inside_an_exclusive_call_takes_its_own_lock() -> None:
    runner = sw.Runner(policies=[spawned_desk, spawned_helper])
    out = runner.run_sync(spawned_desk, run_id="desk")
    results = [m.action_result.value for m in out if m.action_result is not None]
    assert results == ["cancelled 9:00; booked 9:00"]


# Deadlock detection of exclusive locks (core/engine/dispatch.py).
#
# * A call whose result is recorded is checked for a deadlock before its
#   record is looked at: on replay, when the locks happen to be held the
#   crossing way, the recorded call is refused with ``ExclusiveDeadlock``
#   instead of returning its recorded result (S2), and the run goes on from
#   a different history than the one it recorded.
# * A call holding an exclusive lock waits for a ``max_parallel`` slot, held
#   by a call that waits for that lock: a hang the wait-for graph does not see.
#
# Real SQLite files, a real runner; no mocks.


RAN: list[str] = []
EV: dict[str, asyncio.Event] = {}
PHASE = {"n": 1}


# -- a recorded call refused on replay ----------------------------------------------


@sw.policy(exclusive="b")
async def crossed_y_inner() -> str:
    """Needs lock b."""
    RAN.append("y_inner")
    return "y_inner ran"


@sw.policy(exclusive="a")
async def crossed_x_inner() -> str:
    """Needs lock a."""
    RAN.append("x_inner")
    return "x_inner ran"


@sw.policy(exclusive="a")
async def crossed_x_outer(ctx: sw.Context) -> str:
    """Holds lock a; asks for a tool needing lock b."""
    if PHASE["n"] == 2:
        await EV["b_held"].wait()
        await asyncio.sleep(0.5)  # order only: y_mid is now waiting for lock a
    text = await ask_for(ctx, "crossed_x_model", "crossed_y_inner", [crossed_y_inner])
    if PHASE["n"] == 1:
        EV["x_done"].set()
        await asyncio.sleep(3600)  # the process dies here
    return text


@sw.policy(exclusive="b")
async def crossed_y_mid(ctx: sw.Context) -> str:
    """Holds lock b; asks for a tool needing lock a."""
    EV["b_held"].set()
    return await ask_for(ctx, "crossed_mid_model", "crossed_x_inner", [crossed_x_inner])


@sw.policy
async def crossed_y_outer(ctx: sw.Context) -> str:
    """No lock; asks for y_mid (lock b), after x_outer's inner call the first time."""
    if PHASE["n"] == 1:
        await EV["x_done"].wait()
    return await ask_for(ctx, "crossed_y_model", "crossed_y_mid", [crossed_y_mid])


@sw.policy
async def crossed_top(ctx: sw.Context) -> list[str]:
    llm: Any = ScriptedLLM(
        [[call("crossed_x_outer"), call("crossed_y_outer")]], name="crossed_top_model"
    )
    out = await ctx.call(
        llm, observations=[Message.user("go")], options=[crossed_x_outer, crossed_y_outer]
    )
    return result_texts(out)


async def test_a_recorded_call_replays_its_result_even_when_the_locks_cross(
    sqlite_url: str,
) -> None:
    url = sqlite_url
    RAN.clear()
    PHASE["n"] = 1
    EV.update(x_done=asyncio.Event(), b_held=asyncio.Event())
    runner = sw.Runner(url)
    await runner.start(crossed_top, run_id="cross")
    await asyncio.wait_for(EV["x_done"].wait(), 30)
    await asyncio.wait_for(EV["b_held"].wait(), 30)
    await asyncio.sleep(0.3)  # y_mid's model step is recorded
    await runner.close()  # handed back unfinished, as after a crash
    assert RAN == ["y_inner"]  # recorded at step 1#1.1#1

    PHASE["n"] = 2
    EV.update(x_done=asyncio.Event(), b_held=asyncio.Event())
    async with sw.Runner(url) as fresh:
        handle = await fresh.start(crossed_top, run_id="cross")
        texts = await asyncio.wait_for(handle.result(60), 60)
    # x_outer's inner call is recorded: its result is the recorded one.
    assert texts[0] == "y_inner ran", texts
    assert RAN.count("y_inner") == 1


# -- a lock holder waiting for a parallelism slot ---------------------------------


@sw.policy(exclusive="b")
async def crossed_b_leaf() -> str:
    """Needs lock b."""
    return "b_leaf ran"


@sw.policy(exclusive="a")
async def crossed_a_holder(ctx: sw.Context) -> str:
    """Holds lock a; lets b_holder start; asks for a tool needing lock b."""
    for _ in range(3):
        await asyncio.sleep(0)  # b_holder takes lock b, then waits for a slot
    return await ask_for(ctx, "crossed_a_model", "crossed_b_leaf", [crossed_b_leaf])


@sw.policy(exclusive="b")
async def crossed_b_holder() -> str:
    """Holds lock b, asks for nothing."""
    return "b_holder ran"


@sw.policy
async def crossed_slots(ctx: sw.Context) -> list[str]:
    llm: Any = ScriptedLLM(
        [[call("crossed_a_holder"), call("crossed_b_holder")]], name="crossed_slots_model"
    )
    out = await ctx.call(
        llm, observations=[Message.user("go")], options=[crossed_a_holder, crossed_b_holder]
    )
    return result_texts(out)


async def test_without_a_parallelism_limit_the_calls_all_run() -> None:
    async with sw.Runner() as runner:
        texts = await asyncio.wait_for(runner.run(crossed_slots, run_id="free"), 60)
    assert texts == ["b_leaf ran", "b_holder ran"]


async def test_a_lock_holder_waiting_for_a_slot_does_not_hang() -> None:
    async with sw.Runner(max_parallel=1) as runner:
        # A bound on a hang only: the run needs no waiting at all.
        texts = await asyncio.wait_for(runner.run(crossed_slots, run_id="slots"), 10)
    assert texts == ["b_leaf ran", "b_holder ran"]


# Duplicate call ids and crossed named locks (core/engine/dispatch.py).
#
# * Two calls of one model reply with the same id both ran: the model could
#   not tell their results apart. Now the first runs and the duplicate's
#   result is a ``DuplicateCallId`` error naming the id and both steps; keys
#   stay positional, so a replay is the same.
# * Two named exclusive locks taken in opposite orders by calls of one run
#   (X holding "a" asks for "b" while Y holding "b" asks for "a") waited for
#   ever. Now the call that would close the cycle is refused with an
#   ``ExclusiveDeadlock`` error naming both locks and its step.
#
# Real SQLite files, a real runner; no mocks.


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


def test_a_duplicate_call_id_is_not_run_and_says_why(sqlite_url: str) -> None:
    url = sqlite_url
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
    sqlite_url: str,
) -> None:
    async with sw.Runner(sqlite_url) as runner:
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


# The lock table of an execution: reentry, cycles, and tables kept apart.


async def test_a_lock_is_reentered_only_inside_its_own_tables_holder() -> None:
    parent, child = LockTable(), LockTable()
    assert not parent.reentered("lock:a")
    async with parent.hold("lock:a"):
        assert parent.reentered("lock:a")
        # A child run's lock of the same name is its own: taken, not refused.
        assert not child.reentered("lock:a")
        async with child.hold("lock:a"):
            assert child.reentered("lock:a")
    assert not parent.reentered("lock:a")


async def test_crossed_locks_are_a_cycle_named_in_order() -> None:
    table = LockTable()
    a_held, b_held = asyncio.Event(), asyncio.Event()
    seen: list[list[str] | None] = []

    async def x() -> None:
        async with table.hold("lock:a"):
            a_held.set()
            await b_held.wait()
            async with table.hold("lock:b"):  # waits: b is held by y
                pass

    async def y() -> None:
        async with table.hold("lock:b"):
            b_held.set()
            await a_held.wait()
            for _ in range(5):
                await asyncio.sleep(0)  # x is now waiting for b
            seen.append(table.cycle("lock:a"))

    async with asyncio.TaskGroup() as tg:
        tg.create_task(x())
        tg.create_task(y())
    assert seen == [["lock:a", "lock:b"]]
    assert table.cycle("lock:a") is None  # nothing held, nothing waits
