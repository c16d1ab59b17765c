"""The compact step-argument format (B9, core/stepargs.py).

Two failures it guards against:

* A tool's result value handed from one concurrent branch to another whose
  steps are keyed *earlier* in S1 order was recorded as a reference to the
  later step's output. Every reader refused it ("does not come before it"):
  ``runner.steps``, ``runs show``, an export, a fork of the run.
* Reading the arguments of one step of a long conversation rebuilt and kept
  every earlier step's list as its own copy: O(N²) memory (424 MB to read
  the last step of a 10,000-turn run, measured), where O(N) is the promise.

Real SQLite files and PostgreSQL, a real runner; no mocks.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.ledger import StoredStep
from stalwart.core.stepargs import ext_node, step_hash
from stalwart.timetravel import export_runs, fork, import_runs, read_export, write_export

BIG = {"data": "y" * 400}  # a tool result large enough to be referred to, not copied
handed: dict[str, Any] = {}  # what the later branch hands over, and when


@sw.policy
async def fetch() -> dict[str, str]:
    """A tool whose (large) result another branch passes on."""
    return dict(BIG)


@sw.policy
async def summarize(messages: list[sw.Message]) -> str:
    """A model call that reads a conversation holding the tool's result."""
    return f"{len(messages)} messages"


@sw.policy
async def early_branch(ctx: sw.Context) -> str:
    """Keyed ``1``: its model call (``1.1``) is made after ``2.1`` returned."""
    await handed["ready"].wait()
    result = sw.Message.result("call-1", handed["value"], name="fetch")
    return await ctx.call(summarize, messages=[sw.Message.user("what did it say?"), result])


@sw.policy
async def late_branch(ctx: sw.Context) -> str:
    """Keyed ``2``: its tool call (``2.1``) hands its value to the other branch."""
    handed["value"] = await ctx.call(fetch)
    handed["ready"].set()
    return "fetched"


@sw.policy
async def two_branches(ctx: sw.Context) -> list[str]:
    """Two concurrent branches, the earlier-keyed one using the later one's result."""
    handed["ready"] = asyncio.Event()
    return list(await asyncio.gather(ctx.call(early_branch), ctx.call(late_branch)))


def _messages(steps: list[Any]) -> list[Any]:
    (call,) = [s for s in steps if s.name == summarize.name]
    return list(json.loads(call.args)["messages"])


async def test_a_value_from_a_later_keyed_branch_is_readable_exported_and_forked(
    store_url: str, tmp_path: Path
) -> None:
    async with sw.Runner(store_url, policies=[two_branches]) as runner:
        handle = await runner.start(two_branches, run_id="branches")
        assert await handle.result(timeout=30) == ["2 messages", "fetched"]
        steps = await runner.steps("branches")
        # The model call's arguments read back whole, the tool's value in them.
        seen = _messages(steps)
        assert seen[1]["v"]["result"]["value"] == BIG
        # Recorded with no reference to a step made later in S1 order.
        (call,) = [s for s in steps if s.name == summarize.name]
        stored = await runner.store.load_stored_steps("branches")
        assert '"$t":"out"' not in (stored[call.key].args or "")

        # An export reads back and imports into another store.
        out = io.StringIO()
        write_export(await export_runs(runner.store, "branches"), out)
        dumps = read_export(io.StringIO(out.getvalue()))
    async with sw.Runner(f"sqlite:///{tmp_path / 'copy.db'}") as other:
        assert await import_runs(other.store, dumps) == ["branches"]
        assert _messages(await other.steps("branches")) == seen

    # A fork at the tool's step copies the model call made before it in S1
    # order, and reads it back whole.
    async with sw.Runner(store_url, policies=[two_branches]) as runner:
        forked = await fork(runner, "branches", at="2.1", new_run_id="branches-b")
        assert await forked.result(timeout=30) == ["2 messages", "fetched"]
        assert _messages(await runner.steps("branches-b")) == seen


@sw.policy
async def chat(messages: list[sw.Message]) -> str:
    """A model call given the whole conversation so far."""
    return "ok"


@sw.policy
async def long_chat(ctx: sw.Context, turns: int) -> int:
    """``turns`` model calls, each given the conversation one message longer."""
    history = [sw.Message.system("You answer briefly. " * 10)]
    for i in range(turns):
        history.append(sw.Message.user(f"turn {i}"))
        await ctx.call(chat, messages=list(history))
    return len(history)


async def _peak_reading_last(url: str, run_id: str, turns: int) -> tuple[int, int]:
    """The peak memory (bytes) of reading the last step's arguments of a
    ``turns``-turn conversation, and their length."""
    async with sw.Runner(url, policies=[long_chat]) as runner:
        handle = await runner.start(long_chat, turns, run_id=run_id)
        assert await handle.result(timeout=60) == turns + 1
        key = (await runner.steps(run_id))[-1].key
        tracemalloc.start()
        try:
            last = await runner.store.load_step(run_id, key)  # rebuilt from the chain of steps
            assert last is not None
            text = last.args or ""
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        stored = (await runner.store.load_stored_steps(run_id))[key]
        assert last.name == chat.name and '"$t":"ext"' in (stored.args or "")
    assert len(json.loads(text)["messages"]) == turns + 1
    return peak, len(text)


@pytest.mark.slow
async def test_reading_a_long_conversation_takes_memory_linear_in_its_length(
    sqlite_url: str,
) -> None:
    url = sqlite_url
    small, small_text = await _peak_reading_last(url, "short", 1000)
    large, large_text = await _peak_reading_last(url, "long", 2000)
    assert 1.8 < large_text / small_text < 2.2
    # Twice the turns, about twice the memory (it was four times: every
    # step's list kept as a copy of its own).
    assert large / small < 2.6, f"{small} then {large} bytes to read one step"


# More of the compact step-argument format (core/stepargs.py,
# core/engine/identity.py).
#
# * A keyword argument named ``"*5"`` was taken for the sixth positional
#   argument: a list under that keyword was recorded as extending an earlier
#   step's positional list, and every reader then failed on it (or read the
#   wrong list).
# * When two workers race on a step and the other one's record wins with other
#   arguments, the loser must say it is nondeterminism naming the run and the
#   step, even when the winner's record refers to steps the loser never read.
#
# Real SQLite files and PostgreSQL, a real runner; no mocks.


LONG = "a long system prompt that is well past the size worth referring to. " * 3


@sw.policy
async def echo(*args: Any, **kwargs: Any) -> int:
    """A step given anything: the lengths of what it got."""
    return len(args) + len(kwargs)


@sw.policy
async def star_keyword(ctx: sw.Context) -> int:
    """A positional list argument 5, then a keyword argument named "*5" that
    holds a longer list starting the same way."""
    items = [LONG, "one"]
    await ctx.call(echo, 0, 1, 2, 3, 4, list(items))
    await ctx.call(echo, **{"*5": [*items, "two"]})
    await ctx.call(echo, 0, 1, 2, 3, 4, [*items, "two", "three"], **{"*5": [LONG]})
    return 3


async def test_a_keyword_named_like_a_positional_field_reads_back_as_given(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=[star_keyword]) as runner:
        handle = await runner.start(star_keyword, run_id="star")
        assert await handle.result(timeout=30) == 3
        steps = [s for s in await runner.steps("star") if s.name == echo.name]
        assert [json.loads(s.args or "") for s in steps] == [
            {"*": [0, 1, 2, 3, 4, [LONG, "one"]]},
            {"*5": [LONG, "one", "two"]},
            {"*": [0, 1, 2, 3, 4, [LONG, "one", "two", "three"]], "*5": [LONG]},
        ]


# -- a race on a step whose winning record refers to steps the loser never read --

RACE: dict[str, Any] = {}


@sw.policy
async def raced_chat(messages: list[sw.Message]) -> str:
    """A model call; the second one is raced by another worker's record."""
    if len(messages) == 3 and "write" in RACE:
        await RACE.pop("write")()
        if RACE.pop("fail", False):
            raise RuntimeError("this worker's call failed")
    return "mine"


@sw.policy
async def conversation(ctx: sw.Context) -> str:
    history = [sw.Message.system(LONG), sw.Message.user("first")]
    await ctx.call(raced_chat, messages=list(history))
    history.append(sw.Message.user("second"))
    return await ctx.call(raced_chat, messages=list(history))


def _msg_json(message: sw.Message) -> str:
    from stalwart.core import codec
    from stalwart.core.engine.identity import strip_ids

    return json.dumps(strip_ids(codec.encode(message, "a message")), separators=(",", ":"))


@pytest.mark.parametrize("ours", ["succeeds", "fails"])
async def test_a_lost_race_on_other_arguments_is_nondeterminism(store_url: str, ours: str) -> None:
    RACE["fail"] = ours == "fails"
    async with sw.Runner(store_url, policies=[conversation]) as runner:
        store = runner.store

        async def write_theirs() -> None:
            # The other worker's record of step 2: the same conversation
            # with another last message, recorded compact (it extends step 1).
            (run,) = await store.get_runs(["raced"])
            head = [_msg_json(sw.Message.system(LONG)), _msg_json(sw.Message.user("first"))]
            tail = [_msg_json(sw.Message.user("something else"))]
            whole = '{"messages":[' + ",".join(head + tail) + "]}"
            compact = '{"messages":' + ext_node("1", 2, tail) + "}"
            now = time.time()
            theirs = StoredStep(
                "2", raced_chat.name, step_hash(whole), compact, '"theirs"', None, 1, now, now
            )
            won = await store.record_step("raced", run.fence, theirs)
            assert won.args == compact

        RACE["write"] = write_theirs
        handle = await runner.start(conversation, run_id="raced")
        with pytest.raises(sw.NonDeterminismError) as caught:
            await handle.result(timeout=30)
        text = str(caught.value)
        assert "raced" in text and "step 2" in text
        assert "something else" in text  # the winner's arguments, shown whole
