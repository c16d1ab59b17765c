"""Per-tool locks: an ``exclusive`` option runs one call at a time within a run.

Concurrency is observed, not timed: each tool counts the calls running at
once and yields to the event loop a few times, so that calls the runtime
started together overlap unless something holds them apart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM, call


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
