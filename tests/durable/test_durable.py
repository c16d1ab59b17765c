"""The durability contract (S1-S12), in one process, on every store."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pydantic
import pytest
from tests.records import step_record

import stalwart as sw
from stalwart.core import codec
from stalwart.core.ledger import RunRecord

CALLS: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()
    FLAGS.clear()


FLAGS: dict[str, Any] = {}


@sw.policy
async def double(x: int) -> int:
    CALLS.append(f"double:{x}")
    return 2 * x


@sw.policy
async def boom(x: int) -> int:
    CALLS.append(f"boom:{x}")
    raise ValueError(f"bad {x}")


@sw.policy
async def three_steps(ctx: sw.Context, x: int) -> int:
    a = await double(x)
    b = await ctx.call(double, a)
    c = await double(x=b)
    return c


@sw.policy
async def wait_then_double(ctx: sw.Context, x: int) -> int:
    a = await double(FLAGS.get("arg", x))
    got = await ctx.wait_for("go")
    return a + await double(int(got))


@sw.policy
async def catch_then_wait(ctx: sw.Context, x: int) -> str:
    try:
        await boom(x)
    except ValueError as exc:
        first = str(exc)
    await ctx.wait_for("go")
    try:
        await boom(x)
    except ValueError as exc:
        return f"{first} / {exc}"
    return "no error"


async def test_run_is_recorded_and_idempotent(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        assert await runner.run(three_steps, x=1, run_id="r") == 8
        steps = await runner.steps("r")
        assert [s.key for s in steps] == ["1", "2", "3"]
        assert [s.name for s in steps] == ["double"] * 3
        assert all(s.attempts == 1 and s.finished_at >= s.started_at > 0 for s in steps)
        # Starting the same id again gives the same run: nothing executes.
        assert await runner.run(three_steps, x=1, run_id="r") == 8
    assert CALLS == ["double:1", "double:2", "double:4"]
    async with sw.Runner(store_url) as other:  # another runner, same store
        assert await other.run(three_steps, x=1, run_id="r") == 8
        assert (await other.get_run("r")).status == "succeeded"
    assert len(CALLS) == 3


async def test_same_id_with_other_inputs_is_refused(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        await runner.run(three_steps, x=1, run_id="r")
        with pytest.raises(sw.InputMismatchError, match="other inputs"):
            await runner.start(three_steps, x=2, run_id="r")


async def test_replay_returns_records_without_executing(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        handle = await runner.start(wait_then_double, x=3, run_id="w")
        await _until(runner, "w", "suspended")
        assert CALLS == ["double:3"]
        await runner.signal("w", "go", 5)
        assert await handle.result(timeout=10) == 16
    assert CALLS == ["double:3", "double:5"]  # step 1 replayed, not re-executed


async def test_errors_are_recorded_and_replayed(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        handle = await runner.start(catch_then_wait, x=1, run_id="e")
        await _until(runner, "e", "suspended")
        await runner.signal("e", "go")
        assert await handle.result(timeout=10) == "bad 1 / bad 1"
        steps = await runner.steps("e")
    # Replay raised the recorded ValueError without running boom again;
    # the second call is a new step and ran live.
    assert CALLS == ["boom:1", "boom:1"]
    assert [s.error is not None for s in steps if s.name == "boom"] == [True, True]


async def test_nondeterminism_fails_the_run_naming_both_sides(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        handle = await runner.start(wait_then_double, x=3, run_id="nd")
        await _until(runner, "nd", "suspended")
        FLAGS["arg"] = 4  # the code now makes another call at step 1
        await runner.signal("nd", "go", 1)
        with pytest.raises(sw.NonDeterminismError) as info:
            await handle.result(timeout=10)
        assert (await runner.get_run("nd")).status == "failed"
    text = str(info.value)
    assert "step 1" in text and '"*":[3]' in text and '"*":[4]' in text


@sw.policy
async def patched_flow(ctx: sw.Context) -> str:
    first = await double(1)
    if FLAGS.get("new_code") and await ctx.patched("add-step"):
        await double(100)
    await ctx.wait_for("go")
    return f"{first}:{await double(2)}"


async def test_patch_marker_keeps_old_runs_on_old_path(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        old = await runner.start(patched_flow, run_id="old")
        await _until(runner, "old", "suspended")
        FLAGS["new_code"] = True
        new = await runner.start(patched_flow, run_id="new")
        await _until(runner, "new", "suspended")
        await runner.signal("old", "go")
        await runner.signal("new", "go")
        assert await old.result(timeout=10) == "2:4"
        assert await new.result(timeout=10) == "2:4"
        new_steps = [s.name for s in await runner.steps("new")]
    assert "stalwart.patch:add-step" in new_steps
    assert CALLS.count("double:100") == 1  # only the run started on new code


@sw.policy
async def sleeper(ctx: sw.Context, seconds: float) -> float:
    start = await ctx.now()
    await ctx.sleep(seconds)
    return (await ctx.now()) - start


async def test_durable_sleep_suspends_and_wakes(store_url: str) -> None:
    async with sw.Runner(store_url, inline_sleep=0.01, poll_interval=0.05) as runner:
        handle = await runner.start(sleeper, seconds=0.4, run_id="s")
        rec = await _until(runner, "s", "suspended")
        assert rec.wake_at is not None and rec.wake_at > time.time()
        assert "s" not in runner.executing  # nothing held while it waits
        slept = await handle.result(timeout=10)
    assert slept >= 0.4


async def test_recorded_now_uuid_random_replay_the_same(store_url: str) -> None:
    @sw.policy
    async def values(ctx: sw.Context) -> list[Any]:
        out = [await ctx.now(), await ctx.uuid(), await ctx.random()]
        await ctx.wait_for("go")
        return [*out, await ctx.now(), await ctx.uuid(), await ctx.random()]

    async with sw.Runner(store_url, poll_interval=0.05, policies=[values]) as runner:
        handle = await runner.start(values, run_id="v")
        await _until(runner, "v", "suspended")
        first = [s for s in await runner.steps("v") if s.kind in ("now", "uuid", "random")]
        await runner.signal("v", "go")
        result = await handle.result(timeout=10)
    assert [codec.loads(s.output or "") for s in first] == result[:3]


async def test_signals_queue_and_time_out(store_url: str) -> None:
    @sw.policy
    async def two_waits(ctx: sw.Context) -> list[Any]:
        a = await ctx.wait_for("msg")
        try:
            await ctx.wait_for("never", timeout=0.2)
        except TimeoutError as exc:
            b = str(exc)
        return [a, b]

    async with sw.Runner(store_url, poll_interval=0.05, policies=[two_waits]) as runner:
        handle = await runner.start(two_waits, run_id="q")
        await runner.signal("q", "msg", {"hello": "world"})
        result = await handle.result(timeout=10)
    assert result[0] == {"hello": "world"}
    assert "no signal 'never'" in result[1]


async def test_signal_sent_before_the_wait_is_not_lost(store_url: str) -> None:
    @sw.policy
    async def late_wait(ctx: sw.Context) -> Any:
        await ctx.sleep(0.3)
        return await ctx.wait_for("early")

    async with sw.Runner(
        store_url, inline_sleep=0.01, poll_interval=0.05, policies=[late_wait]
    ) as runner:
        handle = await runner.start(late_wait, run_id="early")
        await runner.signal("early", "early", [1, 2])
        assert await handle.result(timeout=10) == [1, 2]


async def test_cancel_a_running_and_a_suspended_run(store_url: str) -> None:
    started = asyncio.Event()

    @sw.policy
    async def forever(ctx: sw.Context) -> None:
        started.set()
        await asyncio.sleep(3600)

    async with sw.Runner(store_url, poll_interval=0.05, policies=[forever]) as runner:
        handle = await runner.start(forever, run_id="c1")
        await started.wait()
        await runner.cancel("c1")
        with pytest.raises(sw.CancelledRun):
            await handle.result(timeout=10)
        assert (await runner.get_run("c1")).status == "cancelled"

        waiting = await runner.start(wait_then_double, x=1, run_id="c2")
        await _until(runner, "c2", "suspended")
        await runner.cancel("c2")
        with pytest.raises(sw.CancelledRun):
            await waiting.result(timeout=10)
        assert (await runner.get_run("c2")).status == "cancelled"
        with pytest.raises(sw.RunNotFound):
            await runner.cancel("nope")


class Point(pydantic.BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    label: str
    points: list[Point]


async def test_models_and_dataclasses_round_trip(store_url: str) -> None:
    @sw.policy
    async def make_box() -> Box:
        CALLS.append("box")
        return Box("b", [Point(x=1, y=2)])

    @sw.policy
    async def use_box(ctx: sw.Context) -> str:
        box = await make_box()
        await ctx.wait_for("go")
        box_again = await make_box()  # a second step, executed live
        return f"{type(box).__name__}:{box == box_again}:{box.points[0].y}"

    async with sw.Runner(store_url, poll_interval=0.05, policies=[use_box]) as runner:
        handle = await runner.start(use_box, run_id="m")
        await _until(runner, "m", "suspended")
        await runner.signal("m", "go")
        assert await handle.result(timeout=10) == "Box:True:2"


async def test_unserializable_result_fails_at_record_time(store_url: str) -> None:
    @sw.policy
    async def gives_object() -> object:
        return object()

    @sw.policy
    async def parent(ctx: sw.Context) -> str:
        try:
            await gives_object()
        except sw.SerializationError as exc:
            return str(exc)
        return "recorded?"

    async with sw.Runner(store_url, policies=[parent]) as runner:
        message = await runner.run(parent, run_id="ser")
        steps = await runner.steps("ser")
    assert "step 1" in message and "gives_object" in message and "builtins.object" in message
    assert steps[0].error is not None and "SerializationError" in steps[0].error


async def test_large_values_survive(store_url: str) -> None:
    @sw.policy
    async def big() -> str:
        return "x" * 200_000

    @sw.policy
    async def uses_big(ctx: sw.Context) -> int:
        value = await big()
        await ctx.wait_for("go")
        return len(value + await big())

    async with sw.Runner(store_url, poll_interval=0.05, policies=[uses_big]) as runner:
        handle = await runner.start(uses_big, run_id="big")
        await _until(runner, "big", "suspended")
        await runner.signal("big", "go")
        assert await handle.result(timeout=10) == 400_000


async def test_stale_fencing_token_is_refused(store_url: str) -> None:
    store = sw.stores.open_store(store_url)
    assert store is not None
    await store.open()
    try:
        rec = RunRecord("f", "p", "{}")
        await store.create_run(rec)
        first = await store.claim("f", "host:1:a", 0.01)
        assert first is not None
        await asyncio.sleep(0.05)  # the lease expires
        second = await store.claim("f", "host:2:b", 30)
        assert second is not None and second.fence > first.fence
        step = step_record("1", started_at=0.0)
        with pytest.raises(sw.StaleLeaseError):
            await store.record_step("f", first.fence, step)
        won = await store.record_step("f", second.fence, step)
        assert won.output == "1"
        # S3: a second result for the same key loses; the first is returned.
        other = step_record("1", "2", started_at=0.0)
        assert (await store.record_step("f", second.fence, other)).output == "1"
        with pytest.raises(sw.StaleLeaseError):
            await store.finish_run("f", first.fence, "succeeded", "1", None)
    finally:
        await store.close()


async def test_prune_by_count_and_age(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        for i in range(5):
            await runner.run(double, x=i, run_id=f"p{i}")
        assert await runner.prune(keep=2) == 3
        assert len(await runner.list_runs()) == 2
        assert await runner.prune(older_than=0) == 2
        assert await runner.list_runs() == []


async def test_events_show_replayed_and_live_steps(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        await runner.start(wait_then_double, x=1, run_id="ev")
        await _until(runner, "ev", "suspended")
        handle = sw.RunHandle(runner, "ev")
        events: list[Any] = []

        async def collect() -> None:
            async for ev in handle.events():
                events.append(ev)

        collector = asyncio.create_task(collect())
        await asyncio.sleep(0.05)
        await runner.signal("ev", "go", 2)
        await asyncio.wait_for(collector, 10)
    finished = [e for e in events if isinstance(e, sw.CallFinished)]
    # Step 1 came from the ledger; step 4 and the run's root ran live.
    assert [(e.key, e.name, e.replayed) for e in finished] == [
        ("1", "double", True),
        ("4", "double", False),
        ("", "wait_then_double", False),
    ]
    assert isinstance(events[-1], sw.RunFinished) and events[-1].result == 6


async def test_failed_run_raises_its_error_from_any_runner(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        with pytest.raises(ValueError, match="bad 7"):
            await runner.run(boom, x=7, run_id="bad")
    async with sw.Runner(store_url) as other:
        with pytest.raises(ValueError, match="bad 7"):
            await sw.RunHandle(other, "bad").result(timeout=5)
        assert (await other.get_run("bad")).status == "failed"


async def test_group_commit_mode_records_everything(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}?durability=group&group_delay=0.001"
    async with sw.Runner(url) as runner:
        assert await runner.run(three_steps, x=2, run_id="g") == 16
    async with sw.Runner(url) as runner:
        assert len(await runner.steps("g")) == 3


async def test_bad_store_urls_and_unknown_runs(tmp_path: Any) -> None:
    with pytest.raises(sw.StoreError, match="unknown store URL"):
        sw.Runner("mysql://x")
    with pytest.raises(sw.StoreError, match="unknown SQLite store option"):
        sw.Runner(f"sqlite:///{tmp_path}/a.db?color=red")
    runner = sw.Runner(f"sqlite:///{tmp_path}/missing/dir/a.db")
    with pytest.raises(sw.StoreError, match="does not exist"):
        await runner.open()
    async with sw.Runner(f"sqlite:///{tmp_path}/a.db") as ok:
        with pytest.raises(sw.RunNotFound):
            await ok.get_run("nope")


async def test_corrupted_step_row_gives_a_clear_error(tmp_path: Any) -> None:
    import sqlite3

    path = tmp_path / "c.db"
    url = f"sqlite:///{path}"
    async with sw.Runner(url, poll_interval=0.05) as runner:
        await runner.start(wait_then_double, x=1, run_id="cor")
        await _until(runner, "cor", "suspended")
    db = sqlite3.connect(path)
    db.execute("UPDATE steps SET output = '{not json' WHERE key = '1'")
    db.commit()
    db.close()
    async with sw.Runner(
        url, poll_interval=0.05, policies=[wait_then_double], serving=True
    ) as runner:
        await runner.signal("cor", "go", 1)
        with pytest.raises(sw.StoreError, match=r"step 1 of run .cor.*cannot be read back"):
            await sw.RunHandle(runner, "cor").result(timeout=10)
        steps = await runner.steps("cor")
    assert steps[0].key == "1"  # the recorded step is still there


async def _until(runner: sw.Runner, run_id: str, status: str, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        rec = await runner.get_run(run_id)
        if rec.status == status:
            return rec
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} is {rec.status}, not {status}")
        await asyncio.sleep(0.01)


async def test_agent_loop_with_tool_results_replays_after_a_suspension(store_url: str) -> None:
    """Histories rebuilt on replay carry new message ids; replay must still match."""
    from stalwart.testing import ScriptedLLM, call

    llm = ScriptedLLM([call("double", x=2), call("double", x=3), "done"], name="llm")

    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        history = [sw.Message.system("s"), sw.Message.user("go")]
        turns = 0
        while True:
            actions = await ctx.call(llm, observations=history, options=[double])
            history += actions
            turns += 1
            if turns == 2:
                await ctx.wait_for("continue")
            if not any(m.is_action_call for m in actions):
                return actions[-1].text

    async with sw.Runner(store_url, poll_interval=0.05, policies=[agent]) as runner:
        handle = await runner.start(agent, run_id="loop")
        await _until(runner, "loop", "suspended")
        await runner.signal("loop", "continue")
        assert await handle.result(timeout=10) == "done"
    assert llm.calls == 3  # two replayed model turns were not paid for again
    assert CALLS == ["double:2", "double:3"]
