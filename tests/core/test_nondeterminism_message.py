"""A replay that meets another call than the one recorded (S5) fails the run
with both calls shown whole, even when each is recorded as what is new since
an earlier step's list (an agent's conversation, core/stepargs.py)."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

import stalwart as sw

HISTORY = ["an earlier message, long enough to be kept", "and a second one, kept as well"]
LAST: dict[str, str] = {}


@sw.policy
async def converse(history: list[str]) -> int:
    return len(history)


@sw.policy
async def talk(ctx: sw.Context) -> int:
    await converse(HISTORY)
    await converse([*HISTORY, LAST["now"]])
    await ctx.wait_for("go")
    return 0


async def test_a_changed_extended_call_on_replay_shows_both_calls_whole(sqlite_url: str) -> None:
    LAST["now"] = "then"
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[talk]) as runner:
        handle = await runner.start(talk, run_id="changed")
        while (await runner.get_run("changed")).status != "suspended":
            await asyncio.sleep(0.01)
        LAST["now"] = "now"  # the code makes another second call on replay
        await runner.signal("changed", "go", 1)
        with pytest.raises(sw.NonDeterminismError) as caught:
            await handle.result(timeout=10)
    first, recorded, now = str(caught.value).split("\n")[:3]
    whole = ",".join(f'"{m}"' for m in HISTORY)
    assert first == "step 2 of run changed does not match its record:"
    assert recorded == f'  recorded: {converse.name}({{"*":[[{whole},"then"]]}})'
    assert now == f'  now:      {converse.name}({{"*":[[{whole},"now"]]}})'
    assert str(caught.value).split("\n")[3] == (
        "The policy's code changed, or it is not deterministic; "
        "guard changed code with `await ctx.patched(...)`."
    )


async def test_a_changed_call_whose_record_refers_to_a_missing_step_fails_naming_the_record(
    sqlite_url: str,
) -> None:
    """Showing the recorded call means rebuilding it: a record whose reference
    to an earlier step leads nowhere fails the run with the store's word for
    it, naming the run, rather than a mismatch shown with a hole in it."""
    LAST["now"] = "then"
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[talk]) as runner:
        handle = await runner.start(talk, run_id="dangling")
        while (await runner.get_run("dangling")).status != "suspended":
            await asyncio.sleep(0.01)
        db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
        with db:  # step 2 recorded as step 1's list and more: point it at a step that is not there
            db.execute(
                'UPDATE steps SET args = replace(args, \'"k":"1"\', \'"k":"7"\') '
                "WHERE run_id = 'dangling' AND key = '2'"
            )
        db.close()
        LAST["now"] = "now"
        await runner.signal("dangling", "go", 1)
        with pytest.raises(sw.CorruptedRecord) as caught:
            await handle.result(timeout=10)
    assert str(caught.value) == (
        "run 'dangling', step 2, argument '*[0]': it extends step '7', which the run lacks"
    )
