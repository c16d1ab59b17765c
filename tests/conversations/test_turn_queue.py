"""A turn queue answers ``parallel`` turns at once as a sliding window.

``Conversation(runner, agent, id, history=False, parallel=2)``: as soon as
one turn is answered the next queued turn starts, while the others go on; a slow turn holds only its
own place. Proven with events, not timing: turn "one" blocks on an event
until the test lets it go, and turn "three" must start (after "two" ended)
while "one" is still blocked. On every store, and again after the queue's
run is resumed from the ledger by a fresh runner (the order turns ended in
must not move a recorded key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import stalwart as sw

BOUND = 30.0  # a window that does not slide hangs: fail instead

log: list[str] = []
gate: dict[str, asyncio.Event] = {}
changed: dict[str, asyncio.Event] = {}


def note(entry: str) -> None:
    log.append(entry)
    for event in changed.values():
        event.set()


async def until(entry: str) -> None:
    """Wait (bounded) for ``entry`` in the log."""
    event = changed.setdefault("log", asyncio.Event())
    async with asyncio.timeout(BOUND):
        while entry not in log:
            event.clear()
            await event.wait()


@sw.policy
async def answer(question: str) -> str:
    note(f"start:{question}")
    if question in gate:
        await gate[question].wait()
    note(f"end:{question}")
    return question.upper()


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    log.clear()
    gate.clear()
    changed.clear()
    yield
    for event in gate.values():
        event.set()


async def three_turns(runner: sw.Runner) -> None:
    gate["one"] = asyncio.Event()
    queue = sw.Conversation(runner, answer, "answers", history=False, parallel=2)
    handles = [await queue.put(word) for word in ("one", "two", "three")]
    await until("start:three")  # the window slid: "three" did not wait for "one"
    assert log.index("start:three") > log.index("end:two")
    assert "end:one" not in log  # "one" is still running
    gate["one"].set()
    async with asyncio.timeout(BOUND):
        assert [await h.result() for h in handles] == ["ONE", "TWO", "THREE"]


async def test_the_next_turn_starts_when_one_ends_in_memory() -> None:
    async with sw.Runner() as runner:
        await three_turns(runner)


async def test_the_next_turn_starts_when_one_ends(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        await three_turns(runner)


async def test_a_resumed_queue_replays_turns_that_ended_out_of_order(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        await three_turns(runner)
    log.clear()
    async with sw.Runner(store_url) as runner:
        queue = sw.Conversation(runner, answer, "answers", history=False, parallel=2)
        handle = await queue.put("four")
        async with asyncio.timeout(BOUND):
            assert await handle.result() == "FOUR"
    assert log == ["start:four", "end:four"]  # the first three replayed, not run again


async def test_a_queue_goes_on_past_max_turns_with_its_window(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        queue = sw.Conversation(runner, answer, "answers", history=False, parallel=2, max_turns=2)
        handles = [await queue.put(f"w{i}") for i in range(5)]
        async with asyncio.timeout(BOUND):
            assert [await h.result() for h in handles] == [f"W{i}" for i in range(5)]
        steps = await runner.steps("answers")
    assert steps  # the run holds only its latest generation's steps
    assert all(not s.key.startswith("g1.") for s in steps)  # g1 and g2 handed over
