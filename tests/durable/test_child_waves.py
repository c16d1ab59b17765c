"""Children started together (``ctx.spawn_many``) and awaited together
(``ctx.results``): what a replay checks, and what a crash leaves behind."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from tests.crash import spawn
from tests.hostile import write_row

import stalwart as sw
from stalwart.core.context import Child
from stalwart.testing import load_recording, replay_async

# How many times each parent policy has executed (first execution, replays).
EXECUTIONS: dict[str, int] = {}


@pytest.fixture(autouse=True)
def _reset() -> None:
    EXECUTIONS.clear()


def executed(name: str) -> int:
    EXECUTIONS[name] = EXECUTIONS.get(name, 0) + 1
    return EXECUTIONS[name]


@sw.policy
async def slow_echo(x: int) -> int:
    await asyncio.sleep(0.2)  # the parent suspends, and replays when woken
    return x


@sw.policy
async def grows(ctx: sw.Context) -> list[int]:
    """Three children the first time, four on replay: not deterministic."""
    n = 3 if executed("grows") == 1 else 4
    children = await ctx.spawn_many(slow_echo, [((i,), {}) for i in range(n)])
    return list(await ctx.results(children))


@sw.policy
async def reorders(ctx: sw.Context) -> list[int]:
    """The same children in another order on replay."""
    items = [0, 1, 2] if executed("reorders") == 1 else [2, 1, 0]
    children = await ctx.spawn_many(slow_echo, [((i,), {}) for i in items])
    return list(await ctx.results(children))


@sw.policy
async def steady(ctx: sw.Context) -> list[int]:
    children = await ctx.spawn_many(slow_echo, [((i,), {}) for i in range(3)])
    return list(await ctx.results(children))


POLICIES: list[Any] = [slow_echo, grows, reorders, steady]


@pytest.mark.parametrize("parent", [grows, reorders])
async def test_children_started_otherwise_on_replay_fail_the_run_naming_the_step(
    store_url: str, parent: Any
) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=POLICIES) as runner:
        with pytest.raises(sw.NonDeterminismError, match=r"step 1 of run w does not match"):
            await runner.run(parent, run_id="w")
        # Only the children of the first execution were ever started.
        children = [r for r in await runner.list_runs(limit=100) if r.parent_id == "w"]
        assert len(children) == 3


async def test_children_started_alike_on_replay_are_found_again(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=POLICIES) as runner:
        assert await runner.run(steady, run_id="w") == [0, 1, 2]
        children = [r for r in await runner.list_runs(limit=100) if r.parent_id == "w"]
        assert len(children) == 3


WAVE_APP = str(Path(__file__).with_name("wave_crash_app.py"))


def test_a_wave_killed_before_its_spawn_is_recorded_finds_its_children_again(
    store_url: str, tmp_path: Path
) -> None:
    """SIGKILL after the children are in the store, before the parent's
    spawn step is: the resumed parent starts the same children (their ids
    come from the step), never a second set, and awaits them."""
    counter = tmp_path / "executions"
    proc = spawn(WAVE_APP, store_url, counter, "kill", "wave", 6)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    assert "children started" in out

    async def children() -> list[sw.RunRecord]:
        async with sw.Runner(store_url, serving=False) as runner:
            assert [s.key for s in await runner.steps("wave")] == []  # nothing recorded
            return [r for r in await runner.list_runs(limit=100) if r.parent_id == "wave"]

    before = sorted(r.id for r in asyncio.run(children()))
    assert len(before) == 6
    proc = spawn(WAVE_APP, store_url, counter, "recover", "wave", 6)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert "result " + json.dumps(sum(i**3 for i in range(6))) in out

    async def after() -> list[str]:
        async with sw.Runner(store_url, serving=False) as runner:
            return sorted(r.id for r in await runner.list_runs(limit=100) if r.parent_id == "wave")

    assert asyncio.run(after()) == before  # the same six, none started twice
    executions = collections.Counter(counter.read_text().split())
    assert sorted(executions) == [f"cube:{i}" for i in range(6)]
    assert set(executions.values()) == {1}


@sw.policy(name="steady")
async def steady_with_a_fourth_child(ctx: sw.Context) -> list[int]:
    """``steady`` as a new deploy would have it: one child more."""
    children = await ctx.spawn_many(slow_echo, [((i,), {}) for i in range(4)])
    return list(await ctx.results(children))


async def test_the_replay_gate_finds_a_wave_that_starts_other_children(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=POLICIES) as runner:
        assert await runner.run(steady, run_id="w") == [0, 1, 2]
    same = await replay_async((store_url, "w"), steady)
    assert same.ok, str(same)
    changed = await replay_async((store_url, "w"), steady_with_a_fourth_child)
    assert not changed.ok
    first = changed.divergences[0]
    assert (first.kind, first.key) == ("arguments", "1"), str(changed)
    assert '"children":3' in str(first.recorded) and '"children":4' in str(first.now)


async def test_a_spawn_recorded_before_children_were_hashed_replays_as_recorded(
    store_url: str,
) -> None:
    """A run recorded by a release whose spawn steps kept no hash of their
    children is not told it diverged: its children are the recorded ones."""
    async with sw.Runner(store_url, poll_interval=0.05, policies=POLICIES) as runner:
        assert await runner.run(steady, run_id="w") == [0, 1, 2]
    recording = await load_recording((store_url, "w"))
    spawned = recording.steps["1"]
    assert spawned.args_hash  # as this release records it
    recording.steps["1"] = dataclasses.replace(spawned, args_hash="", args="{}")
    report = await replay_async(recording, steady_with_a_fourth_child)
    assert report.ok, str(report)


@sw.policy
async def keeps_errors(ctx: sw.Context) -> list[str]:
    children = await ctx.spawn_many(slow_echo, [((i,), {}) for i in range(2)], queue="elsewhere")
    return [repr(g) for g in await ctx.results(children, return_exceptions=True)]


async def test_a_child_outcome_that_cannot_be_read_fails_the_parent_even_keeping_errors(
    store_url: str,
) -> None:
    """A child's result row that cannot be read back is not that child's
    error, to be kept in its place: the parent run fails naming its step
    and the child (S14)."""
    policies = [*POLICIES, keeps_errors]
    async with sw.Runner(store_url, poll_interval=0.05, policies=policies, queues=["default"]) as r:
        handle = await r.start(keeps_errors, run_id="k")
        for _ in range(200):  # the parent waits for its children (nobody serves their queue)
            if await handle.status() == "suspended":
                break
            await asyncio.sleep(0.05)
        write_row(
            store_url,
            "UPDATE runs SET status = 'succeeded', result = '{not json' WHERE parent_id = ?",
            "k",
        )
        pattern = r"run 'k', step 2: the outcome of child run 'k~1/0' cannot be read back"
        with pytest.raises(sw.CorruptedRecord, match=pattern):
            await handle.result(timeout=30)
        assert await handle.status() == "failed"


@sw.policy
async def waits_for_slow_children(ctx: sw.Context) -> list[int]:
    children = await ctx.spawn_many(slow_echo, [((i,), {}) for i in range(3)], queue="later")
    return list(await ctx.results(children))


async def test_a_parent_cancelled_while_awaiting_its_wave_stays_cancelled(store_url: str) -> None:
    """Cancelling the parent ends it at once; its children, runs of their
    own, still finish when a worker takes them, and their finishing does
    not wake the cancelled parent."""
    policies = [*POLICIES, waits_for_slow_children]
    async with sw.Runner(store_url, poll_interval=0.05, policies=policies, queues=["default"]) as r:
        handle = await r.start(waits_for_slow_children, run_id="p")
        for _ in range(200):
            if await handle.status() == "suspended":
                break
            await asyncio.sleep(0.05)
        await r.cancel("p")
        with pytest.raises(sw.CancelledRun):
            await handle.result(timeout=30)
    async with sw.Runner(
        store_url, poll_interval=0.05, policies=policies, queues=["later"], serving=True
    ) as w:
        for i in range(3):
            assert await sw.RunHandle(w, f"p~1/{i}").result(timeout=30) == i
        await asyncio.sleep(0.3)  # a wake-up, were there one, has come
        parent = await w.store.get_run("p")
        assert parent is not None and parent.status == "cancelled"
        assert [s.key for s in await w.steps("p")] == ["1"]  # never resumed past its wait


@sw.policy
async def owns_a_slow_child(ctx: sw.Context) -> int:
    children = await ctx.spawn_many(slow_echo, [((7,), {})], queue="later")
    return sum(await ctx.results(children))


@sw.policy
async def awaits_anothers_child(ctx: sw.Context) -> int:
    return sum(await ctx.results([Child(ctx, "o~1/0")]))


async def test_awaiting_another_runs_child_fails_naming_it_instead_of_spinning(
    store_url: str,
) -> None:
    """Only a run's own children wake it; a wait for another run's child
    would resume and suspend again without end."""
    policies = [*POLICIES, owns_a_slow_child, awaits_anothers_child]
    async with sw.Runner(store_url, poll_interval=0.05, policies=policies, queues=["default"]) as r:
        await r.start(owns_a_slow_child, run_id="o")
        for _ in range(200):
            if await r.store.get_run("o~1/0") is not None:
                break
            await asyncio.sleep(0.05)
        handle = await r.start(awaits_anothers_child, run_id="b")
        pattern = r"run 'b', step 1: run 'o~1/0' is not a child of this run \(its parent is 'o'\)"
        with pytest.raises(sw.StalwartError, match=pattern):
            await handle.result(timeout=30)
        rec = await r.store.get_run("b")
        assert rec is not None and rec.status == "failed" and rec.fence == 1  # executed once
