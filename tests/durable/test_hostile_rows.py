"""S13 and S14 on real stores: hostile rows written behind the engine's back
run nothing; one name is one policy and one run id is one run; errors end
where they belong and nothing loops."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from tests.hostile import Evil, evil_module, write_row

import stalwart as sw
from stalwart import llm
from stalwart.core.ledger import RunRecord

EXECUTED: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    EXECUTED.clear()


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Evil:
    monkeypatch.syspath_prepend(str(tmp_path))
    return evil_module(tmp_path)


@sw.policy
async def note(x: int) -> int:
    EXECUTED.append(f"note:{x}")
    return x


@sw.policy
async def waits(ctx: sw.Context, x: int) -> Any:
    first = await note(x)
    got = await ctx.wait_for("go")
    return [first, got, await note(x + 1)]


async def _suspended(runner: sw.Runner, run_id: str) -> None:
    deadline = time.monotonic() + 10
    while (await runner.get_run(run_id)).status != "suspended":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


# -- S13: rows are data ---------------------------------------------------------------------
async def test_a_hostile_step_output_fails_the_run_naming_it(store_url: str, evil: Evil) -> None:
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        await runner.start(waits, x=1, run_id="r")
        await _suspended(runner, "r")
    hostile = f'{{"$t":"enum","c":"{evil[0]}:E","v":"a"}}'
    sql = "UPDATE steps SET output = ? WHERE run_id = ? AND key = ?"
    write_row(store_url, sql, hostile, "r", "1")
    async with sw.Runner(store_url, poll_interval=0.05, policies=[waits], serving=True) as runner:
        await runner.signal("r", "go", 2)
        with pytest.raises(sw.CorruptedRecord, match=r"step 1 of run 'r'.*not declared"):
            await sw.RunHandle(runner, "r").result(timeout=10)
        assert (await runner.get_run("r")).status == "failed"
        assert len(await runner.steps("r")) >= 2  # every recorded step survives
    evil.untouched()


async def test_a_run_naming_an_unknown_policy_stays_put_and_imports_nothing(
    store_url: str, evil: Evil, caplog: pytest.LogCaptureFixture
) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        assert client.store is not None
        await client.store.create_run(RunRecord("h", f"{evil[0]}:pol", '{"args":[],"kwargs":{}}'))
    async with sw.Runner(store_url, poll_interval=0.02, policies=[note], serving=True) as worker:
        assert await worker.recover() == []
        await asyncio.sleep(0.2)  # a few polls of the background loop
        assert (await worker.get_run("h")).status == "pending"
    evil.untouched()
    assert "needs policy" in caplog.text and f"{evil[0]}:pol" in caplog.text


async def test_a_hostile_signal_payload_fails_the_run_naming_the_signal(
    store_url: str, evil: Evil
) -> None:
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        await runner.start(waits, x=1, run_id="s")
        await _suspended(runner, "s")
        assert runner.store is not None
        await runner.store.send_signal("s", "go", f'{{"$t":"dc","c":"{evil[0]}:E","v":{{}}}}')
        with pytest.raises(sw.CorruptedRecord, match=r"signal 'go' of run 's'"):
            await sw.RunHandle(runner, "s").result(timeout=10)
    evil.untouched()


async def test_a_hostile_recorded_error_is_raised_as_a_step_error(
    store_url: str, evil: Evil
) -> None:
    async with sw.Runner(store_url) as runner:
        assert await runner.run(note, 1, run_id="e") == 1
    error = f'{{"type":"{evil[0]}.Boom","message":"boom","args":["rm -rf"]}}'
    write_row(store_url, "UPDATE runs SET status = 'failed', error = ? WHERE id = ?", error, "e")
    async with sw.Runner(store_url) as runner:
        with pytest.raises(sw.StepError, match="Boom: boom"):
            await sw.RunHandle(runner, "e").result()
    evil.untouched()


@sw.policy
async def fails_once() -> int:
    EXECUTED.append("fails_once")
    raise ValueError("recorded")


@sw.policy
async def careful(ctx: sw.Context) -> str:
    try:
        await fails_once()
        answer = "no error"
    except ValueError:
        answer = "took the ValueError branch"
    await ctx.wait_for("go")
    return answer


async def test_a_corrupted_recorded_error_fails_the_run_instead_of_taking_a_branch(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        await runner.start(careful, run_id="c")
        await _suspended(runner, "c")
    write_row(store_url, "UPDATE steps SET error = '{broken' WHERE run_id = 'c' AND key = '1'")
    async with sw.Runner(store_url, poll_interval=0.05, policies=[careful], serving=True) as runner:
        await runner.signal("c", "go")
        with pytest.raises(sw.CorruptedRecord, match=r"step 1 of run 'c'"):
            await sw.RunHandle(runner, "c").result(timeout=10)
    assert EXECUTED == ["fails_once"]


# -- one name, one policy; one run id, one run ----------------------------------------------
def _closure(n: int) -> sw.Policy[..., int]:
    @sw.policy
    async def inner() -> int:
        return n

    return inner


first_lambda = sw.policy(lambda: 1)
second_lambda = sw.policy(lambda: -1)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (first_lambda, second_lambda),
        (_closure(1), _closure(2)),
        (llm.Agent(sw.testing.ScriptedLLM(["a"])), llm.Agent(sw.testing.ScriptedLLM(["b"]))),
    ],
    ids=["lambdas", "closures", "agents"],
)
def test_two_policies_under_one_name_are_refused(a: Any, b: Any) -> None:
    runner = sw.Runner(policies=[a])
    with pytest.raises(sw.DuplicatePolicy, match="two different policies are named"):
        runner.register(b)
    with pytest.raises(sw.DuplicatePolicy):
        sw.Runner(policies=[a, b])
    runner.register(a)  # the same policy again is fine


@sw.policy
async def double(x: int) -> int:
    return 2 * x


@sw.policy
async def negate(x: int) -> int:
    return -x


@sw.policy
async def add(a: int, b: int = 0) -> int:
    return a + b


async def test_a_run_id_names_one_run(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        assert await runner.run(double, 21, run_id="one") == 42
        with pytest.raises(sw.InputMismatchError, match="another policy"):
            await runner.run(negate, 21, run_id="one")
        assert await runner.run(add, 1, b=2, run_id="sum") == 3
        # The same call, however it is spelled, is the same run.
        assert await runner.run(add, a=1, b=2, run_id="sum") == 3
        assert await runner.run(add, b=2, a=1, run_id="sum") == 3
        assert await runner.run(add, 1, 2, run_id="sum") == 3
        with pytest.raises(sw.InputMismatchError, match="other inputs"):
            await runner.run(add, 1, 3, run_id="sum")
        with pytest.raises(sw.InputMismatchError, match="other inputs"):
            await runner.run(add, True, 2, run_id="sum")  # True is not 1


@pytest.mark.parametrize("bad", ["", "p~1/0", "a\x1b[2Jb", "x" * 600])
async def test_run_ids_that_could_collide_or_hurt_are_refused(store_url: str, bad: str) -> None:
    async with sw.Runner(store_url) as runner:
        with pytest.raises(ValueError, match="run id"):
            await runner.start(double, 1, run_id=bad)
        assert await runner.list_runs() == []  # nothing ran, nothing was recorded


@sw.policy
async def parent(ctx: sw.Context) -> int:
    return sum(await ctx.map(double, [1, 2]))


async def test_a_user_run_cannot_pose_as_a_child(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        assert await runner.run(parent, run_id="p") == 6
        children = [r for r in await runner.list_runs() if r.parent_id == "p"]
        assert len(children) == 2 and all("~" in r.id for r in children)
        with pytest.raises(ValueError, match="kept for child runs"):
            await runner.run(double, 1, run_id=children[0].id)


# -- S14: errors stay where they belong; nothing loops ---------------------------------------
class Fatal(BaseException):
    pass


@sw.policy
async def argparse_tool(kind: str) -> int:
    EXECUTED.append(kind)
    if kind == "exit":
        raise SystemExit(2)  # argparse inside a tool
    if kind == "cancel":
        raise asyncio.CancelledError  # not a cancellation of the run
    raise Fatal("custom")


@sw.policy
async def uses_tool(ctx: sw.Context, kind: str) -> str:
    try:
        await argparse_tool(kind)
    except sw.StepError as exc:
        return f"caught {exc.error_type}"
    return "no error"


@pytest.mark.parametrize("kind", ["exit", "cancel", "custom"])
async def test_a_base_exception_from_a_step_is_its_error_executed_once(
    store_url: str, kind: str
) -> None:
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        result = await runner.run(uses_tool, kind, run_id="b")
        await asyncio.sleep(0.2)  # a looping runner would execute it again meanwhile
        (step,) = await runner.steps("b")
    assert result == f"caught {type(_base(kind)).__name__}"
    assert [kind] == EXECUTED
    assert step.error is not None and type(_base(kind)).__name__ in step.error
    async with sw.Runner(store_url, policies=[uses_tool]) as again:  # replays, executes nothing
        assert await again.run(uses_tool, kind, run_id="b") == result
    assert [kind] == EXECUTED


def _base(kind: str) -> BaseException:
    return {"exit": SystemExit(2), "cancel": asyncio.CancelledError(), "custom": Fatal()}[kind]


@sw.policy
async def signals_a_finished_run(ctx: sw.Context, url: str) -> str:
    EXECUTED.append("signals")
    async with sw.Runner(url, serving=False) as other:
        await other.signal("done-run", "late", 1)  # a usage error: that run has finished
    return "sent"


async def test_a_permanent_store_error_fails_the_run_once(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        await runner.run(double, 1, run_id="done-run")
        with pytest.raises(sw.StoreError, match="takes no signals") as info:
            await runner.run(signals_a_finished_run, store_url, run_id="u")
        assert not isinstance(info.value, sw.StoreUnavailable)
        await asyncio.sleep(0.3)
        assert (await runner.get_run("u")).status == "failed"
    assert EXECUTED == ["signals"]


# -- replay-aware side channels ---------------------------------------------------------------
@sw.policy
async def approval(ctx: sw.Context) -> str:
    await note(1)
    ctx.emit("needs_approval")
    answer = await ctx.wait_for("approve")
    ctx.emit(f"approved:{answer}")
    await note(2)
    return str(answer)


async def test_events_of_a_replayed_prefix_are_not_delivered_again(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        handle = await runner.start(approval, run_id="a")
        await _suspended(runner, "a")
        first = [e.value async for e in _emitted(handle, stop_after=1)]
    assert first == ["needs_approval"]
    async with sw.Runner(
        store_url, poll_interval=0.02, policies=[approval], serving=True
    ) as runner:
        events = sw.RunHandle(runner, "a").events()
        await runner.signal("a", "approve", "yes")
        seen = [e async for e in events]
    emitted = [e.value for e in seen if isinstance(e, sw.Emitted)]
    assert emitted == ["approved:yes"]  # not "needs_approval" a second time
    replayed = [e.key for e in seen if isinstance(e, sw.CallFinished) and e.replayed]
    assert "1" in replayed  # replayed steps are still reported, marked as such


async def _emitted(handle: sw.RunHandle, stop_after: int) -> Any:
    n = 0
    async for event in handle.events():
        if isinstance(event, sw.Emitted):
            yield event
            n += 1
            if n == stop_after:
                return


async def test_the_handle_from_start_sees_the_runs_first_events(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        handle = await runner.start(waits, x=5, run_id="f")
        await asyncio.sleep(0.1)  # the run reaches its wait before anyone subscribes
        events = handle.events()
        await runner.signal("f", "go", 7)
        seen = [e async for e in events]
    started = [e.key for e in seen if isinstance(e, sw.CallStarted)]
    assert started[:2] == ["", "1"]  # the root call and step 1, from before the subscription
    assert isinstance(seen[-1], sw.RunFinished) and seen[-1].result == [5, 7, 6]


# -- retention never strands a parent -----------------------------------------------------------
@sw.policy
async def fan_elsewhere(ctx: sw.Context) -> int:
    return sum(await ctx.map(double, [1, 2, 3], queue="elsewhere"))


async def test_a_parent_whose_child_vanished_fails_clearly_instead_of_waiting(
    store_url: str,
) -> None:
    # The children sit on a queue this runner does not serve, so the parent waits.
    async with sw.Runner(store_url, poll_interval=0.02, queues=["default"], serving=True) as runner:
        await runner.start(fan_elsewhere, run_id="p")
        await _suspended(runner, "p")
        assert (await runner.prune(older_than=0)) == 0  # retention keeps what "p" needs
    write_row(store_url, "DELETE FROM runs WHERE id = ?", "p~1/1")  # deleted by hand
    async with sw.Runner(
        store_url, poll_interval=0.02, policies=[fan_elsewhere, double], serving=True
    ) as runner:
        with pytest.raises(sw.StoreError, match=r"child run 'p~1/1' is not in the store"):
            await sw.RunHandle(runner, "p").result(timeout=20)
        assert (await runner.get_run("p")).status == "failed"


async def test_a_row_of_the_wrong_shape_is_a_corrupted_record(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        await runner.run(double, 1, run_id="w")
    write_row(sqlite_url, "UPDATE runs SET created_at = 'yesterday' WHERE id = 'w'")
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(sw.CorruptedRecord, match="run 'w': field 'created_at' holds str"):
            await runner.get_run("w")
