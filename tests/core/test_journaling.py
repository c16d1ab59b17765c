"""The engine's public journaling API (docs/journaling.md): a layer's own
units of work inside a run, recorded, replayed, checked, on real stores.

Each durable test suspends the run on a signal, so that the rest of it runs
again by replay in a new execution, as after a crash (S2, S7).
"""

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.policy import use_context

DOC = Path(__file__).resolve().parents[2] / "docs" / "journaling.md"

RAN: list[str] = []
FLAGS: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()
    FLAGS.clear()


@sw.policy
async def double(x: int) -> int:
    RAN.append(f"double:{x}")
    return 2 * x


async def _work(unit: sw.Context, value: int) -> int:
    RAN.append(f"work:{unit.key}")
    if value < 0:
        raise ValueError(f"negative {value}")
    # Awaited inside the unit: a child step keyed below it (S1).
    return await double(value)


@sw.policy
async def unit_then_wait(ctx: sw.Context, x: int) -> str:
    engine = ctx.engine
    value = FLAGS.get("arg", x)
    key = ctx.next_key()
    try:
        out = str(await engine.run_unit(key, "demo.unit", lambda u: _work(u, value), {"v": value}))
    except ValueError as exc:
        out = f"error: {exc}"
    got = await ctx.wait_for("go")
    return f"{out} / {got}"


async def _until(runner: sw.Runner, run_id: str, status: str) -> None:
    for _ in range(1000):
        if (await runner.get_run(run_id)).status == status:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never became {status}")


async def _suspend_then_resume(store_url: str, x: int, run_id: str) -> Any:
    async with sw.Runner(store_url, poll_interval=0.02, policies=[unit_then_wait]) as runner:
        handle = await runner.start(unit_then_wait, x=x, run_id=run_id)
        await _until(runner, run_id, "suspended")
        await runner.signal(run_id, "go", "on")
        result = await handle.result(timeout=10)
        return result, await runner.steps(run_id)


async def test_a_unit_runs_once_and_its_value_comes_back_on_replay(store_url: str) -> None:
    result, steps = await _suspend_then_resume(store_url, 3, "u")
    assert result == "6 / on"
    assert RAN == ["work:1", "double:3"]  # the replay ran neither the unit nor its child
    by_key = {s.key: s for s in steps}
    assert by_key["1"].name == "demo.unit" and by_key["1"].args == '{"v":3}'
    assert by_key["1.1"].name == "double"  # the unit's own child step, keyed below it


async def test_a_units_error_is_recorded_and_raised_again_on_replay(store_url: str) -> None:
    result, steps = await _suspend_then_resume(store_url, -1, "e")
    assert result == "error: negative -1 / on"
    assert RAN == ["work:1"]  # raised from the record on replay, not run again (S4)
    [unit] = [s for s in steps if s.name == "demo.unit"]
    assert unit.output is None and unit.error is not None


async def test_a_unit_with_other_arguments_on_replay_fails_the_run(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[unit_then_wait]) as runner:
        handle = await runner.start(unit_then_wait, x=3, run_id="nd")
        await _until(runner, "nd", "suspended")
        FLAGS["arg"] = 4  # the code now runs the unit with other arguments
        await runner.signal("nd", "go", "on")
        with pytest.raises(sw.NonDeterminismError) as info:
            await handle.result(timeout=10)
        assert (await runner.get_run("nd")).status == "failed"
    text = str(info.value)
    assert "step 1" in text and '{"v":3}' in text and '{"v":4}' in text
    assert RAN == ["work:1", "double:3"]  # the mismatched unit did not run


@sw.policy
async def reads_from_a_thread(ctx: sw.Context) -> list[Any]:
    engine = ctx.engine
    key = ctx.next_key()
    live = await engine.run_unit(key, "demo.unit", lambda u: _work(u, 5), {"v": 5})
    await ctx.wait_for("go")
    # Code that cannot await (a worker thread) reads the same record back.
    found = await asyncio.to_thread(engine.replayed_unit, key, "demo.unit", {"v": 5})
    missing = await asyncio.to_thread(engine.replayed_unit, "9", "demo.unit", {"v": 5})
    return [live, list(found), list(missing)]


async def test_replayed_unit_answers_without_the_loop_or_says_there_is_none(
    sqlite_url: str,
) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[reads_from_a_thread]) as runner:
        handle = await runner.start(reads_from_a_thread, run_id="t")
        await _until(runner, "t", "suspended")
        await runner.signal("t", "go", 1)
        assert await handle.result(timeout=10) == [10, [True, 10], [False, None]]
    assert RAN == ["work:1", "double:5"]


@sw.policy
async def keeps_a_journal(ctx: sw.Context) -> dict[str, Any]:
    engine = ctx.engine
    first = await engine.recorded(ctx.next_key(), "demo.note", lambda: {"step": "identify"})
    await ctx.wait_for("go")
    second = await engine.recorded(ctx.next_key(), "demo.note", lambda: {"step": "resolve"})
    return {"first": first, "second": second, "replayed": engine.replayed_values("demo.note")}


async def test_recorded_values_are_read_back_by_kind_on_replay(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[keeps_a_journal]) as runner:
        handle = await runner.start(keeps_a_journal, run_id="j")
        await _until(runner, "j", "suspended")
        await runner.signal("j", "go", 1)
        result = await handle.result(timeout=10)
        names = {s.key: s.name for s in await runner.steps("j")}
    assert result["first"] == {"step": "identify"} and result["second"] == {"step": "resolve"}
    # The execution that resumed saw the first note in the ledger, by its key.
    assert result["replayed"] == {"1": {"step": "identify"}}
    assert names["1"] == names["4"] == "stalwart.demo.note"  # wait_for took keys 2 and 3


@sw.policy
async def side_context(ctx: sw.Context) -> list[int]:
    side = ctx.engine.context(ctx.next_key())
    with use_context(side):
        a = await double(1)  # a child of the side unit, not of this step
    b = await double(2)
    return [a, b]


async def test_use_context_makes_awaited_policies_children_of_that_unit(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(side_context, run_id="s") == [2, 4]
        keys = [s.key for s in await runner.steps("s")]
    assert keys == ["1.1", "2"]


async def test_a_units_arguments_never_start_an_options_dispatch() -> None:
    reply = [sw.Message.call("double", {"x": 1})]

    async def replies(unit: sw.Context) -> list[sw.Message]:
        return reply

    @sw.policy
    async def offers(ctx: sw.Context) -> Any:
        # "options" here is the unit's identity, not policies offered to it.
        return await ctx.engine.run_unit(ctx.next_key(), "u", replies, {"options": "none"})

    assert await sw.Runner().run(offers) == reply
    assert RAN == []  # the action call in the reply was not executed


def test_the_documented_program_runs(tmp_path: Path) -> None:
    [program] = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    script = tmp_path / "journaling_example.py"
    script.write_text(program)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "mail-1 to ada@example.com; confirmed: yes",
        '1 {"to":"ada@example.com"}',
    ]


@sw.policy
async def unit_done_earlier(ctx: sw.Context, began: float) -> int:
    # Work done before its unit is recorded (a sync flow node's exec, run on
    # a thread): the unit says when it began.
    value: int = await ctx.engine.run_unit(
        ctx.next_key(), "demo.unit", lambda u: _work(u, 2), {"v": 2}, started=began
    )
    return value


async def test_a_unit_recorded_after_its_work_keeps_when_the_work_began(
    sqlite_url: str,
) -> None:
    began = time.time() - 60.0
    async with sw.Runner(sqlite_url, policies=[unit_done_earlier]) as runner:
        assert await runner.run(unit_done_earlier, began, run_id="early") == 4
        [unit] = [s for s in await runner.steps("early") if s.name == "demo.unit"]
    assert unit.started_at == began  # what `runs show` prints as the unit's start
    assert unit.finished_at >= began + 60.0
