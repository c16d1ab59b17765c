"""Hooks (observe, veto) and streamed typed events."""

import asyncio
import contextlib
import threading

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM, call

from ._support import Recorder, collect


@sw.policy
async def double(x: int) -> int:
    return 2 * x


@sw.policy
async def fail(reason: str) -> None:
    raise ValueError(reason)


@sw.policy
async def chatty(ctx: sw.Context, n: int) -> int:
    ctx.emit({"progress": 0})
    value = await double(x=n)
    ctx.emit({"progress": 1})
    return value


# -- hooks ---------------------------------------------------------------------------
async def test_hooks_see_each_call_before_and_after() -> None:
    hook = Recorder()
    assert await sw.Runner(hooks=[hook]).run(chatty, n=3, run_id="h1") == 6
    assert hook.seen == [
        ("before", "", "chatty", {"n": 3}),
        ("before", "1", "double", {"x": 3}),
        ("after", "1", "double", 6),
        ("after", "", "chatty", 6),
    ]


async def test_hooks_get_the_call_info() -> None:
    infos: list[sw.CallInfo] = []

    class Spy(sw.Hook):
        async def before_call(self, call: sw.CallInfo) -> None:
            infos.append(call)

    await sw.Runner(hooks=[Spy()]).run(chatty, n=1, run_id="info")
    assert infos[1] == sw.CallInfo("info", "1", "double", {"x": 1})


async def test_a_hook_that_overrides_nothing_is_harmless() -> None:
    assert await sw.Runner(hooks=[sw.Hook()]).run(chatty, n=2) == 4


async def test_on_error_sees_the_failure_and_the_error_still_propagates() -> None:
    hook = Recorder()

    @sw.policy
    async def root(ctx: sw.Context) -> str:
        try:
            await fail(reason="nope")
        except ValueError as exc:
            return f"caught {exc}"
        return "no error"

    assert await sw.Runner(hooks=[hook]).run(root) == "caught nope"
    ((key, name, error),) = hook.of("error")
    assert (key, name) == ("1", "fail") and isinstance(error, ValueError)
    assert [n for _, n, _ in hook.of("after")] == ["root"]


async def test_several_hooks_run_in_order() -> None:
    order: list[str] = []

    class Tag(sw.Hook):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        async def before_call(self, call: sw.CallInfo) -> None:
            order.append(f"{self.tag}:{call.name}")

    await sw.Runner(hooks=[Tag("a"), Tag("b")]).run(double, x=1)
    assert order == ["a:double", "b:double"]


async def test_a_veto_refuses_a_direct_call() -> None:
    hook = Recorder(veto={"double"})
    ran = False

    @sw.policy
    async def guarded(x: int) -> int:
        nonlocal ran
        ran = True
        return x

    @sw.policy
    async def root(ctx: sw.Context) -> str:
        with pytest.raises(sw.Veto, match="double is not allowed today"):
            await double(x=1)
        return str(await guarded(x=5))

    assert await sw.Runner(hooks=[hook]).run(root) == "5"
    assert ran
    assert [(k, n) for k, n, _ in hook.of("error")] == [("1", "double")]


async def test_a_veto_of_the_root_fails_the_run() -> None:
    with pytest.raises(sw.Veto):
        await sw.Runner(hooks=[Recorder(veto={"double"})]).run(double, x=1)


async def test_a_vetoed_option_call_becomes_an_error_result() -> None:
    ran: list[str] = []

    @sw.policy
    async def delete_all(path: str) -> str:
        ran.append(path)
        return "deleted"

    @sw.policy
    async def agent(ctx: sw.Context) -> list[Message]:
        llm = ScriptedLLM([[call("delete_all", path="/"), call("double", x=4)]])
        return await ctx.call(
            llm, observations=[Message.user("clean up")], options=[delete_all, double]
        )

    hook = Recorder(veto={"delete_all"})
    out = await sw.Runner(hooks=[hook]).run(agent)
    vetoed, ok = (m.action_result for m in out[2:])
    assert vetoed is not None and ok is not None
    assert (vetoed.error_type, vetoed.error_message) == ("Veto", "delete_all is not allowed today")
    assert out[2].text == "Veto: delete_all is not allowed today"
    assert ok.value == 8
    assert ran == []  # the vetoed option never ran
    assert ("1#1", "delete_all") in [(k, n) for k, n, _ in hook.of("before")]


# -- events ----------------------------------------------------------------------------
def kinds(events: list[sw.Event]) -> list[tuple[str, str]]:
    return [(type(e).__name__, getattr(e, "key", "-")) for e in events]


async def test_a_stream_yields_typed_events_in_order() -> None:
    events = await collect(sw.Runner().stream(chatty, n=5, run_id="s1"))
    assert kinds(events) == [
        ("CallStarted", ""),
        ("Emitted", ""),
        ("CallStarted", "1"),
        ("CallFinished", "1"),
        ("Emitted", ""),
        ("CallFinished", ""),
        ("RunFinished", "-"),
    ]
    started, emitted = events[0], events[1]
    assert started == sw.CallStarted("s1", "", "chatty", {"n": 5})
    assert emitted == sw.Emitted("s1", "", {"progress": 0})
    child = events[3]
    assert isinstance(child, sw.CallFinished)
    assert (child.name, child.result, child.replayed) == ("double", 10, False)
    assert child.duration >= 0
    assert events[-1] == sw.RunFinished("s1", "succeeded", 10, None)
    assert all(e.run_id == "s1" for e in events)


async def test_a_failed_call_and_a_failed_run_are_streamed() -> None:
    @sw.policy
    async def root(ctx: sw.Context) -> None:
        with contextlib.suppress(ValueError):
            await fail(reason="first")
        await fail(reason="second")

    events = await collect(sw.Runner().stream(root, run_id="f"))
    failures = [e for e in events if isinstance(e, sw.CallFailed)]
    assert [(e.key, e.name, e.error_type, e.error_message) for e in failures] == [
        ("1", "fail", "ValueError", "first"),
        ("2", "fail", "ValueError", "second"),
        ("", "root", "ValueError", "second"),
    ]
    assert events[-1] == sw.RunFinished("f", "failed", None, "ValueError: second")


async def test_emitted_events_carry_the_key_of_the_emitting_step() -> None:
    @sw.policy
    async def worker(ctx: sw.Context, i: int) -> None:
        ctx.emit(f"hello from {i}")

    @sw.policy
    async def root(ctx: sw.Context) -> None:
        await asyncio.gather(worker(i=1), worker(i=2))

    events = await collect(sw.Runner().stream(root))
    emitted = sorted((e.key, e.value) for e in events if isinstance(e, sw.Emitted))
    assert emitted == [("1", "hello from 1"), ("2", "hello from 2")]


async def test_emit_without_a_listener_does_nothing() -> None:
    @sw.policy
    async def lonely(ctx: sw.Context) -> str:
        for i in range(3):
            ctx.emit(i)
        return "ok"

    assert await sw.Runner().run(lonely) == "ok"
    assert await lonely() == "ok"  # outside a run too


async def test_option_calls_are_streamed_with_their_keys() -> None:
    @sw.policy
    async def agent(ctx: sw.Context) -> str:
        llm = ScriptedLLM([[call("double", x=1), call("fail", reason="r")], "done"])
        history = [Message.user("go")]
        history += await ctx.call(llm, observations=history, options=[double, fail])
        history += await ctx.call(llm, observations=history, options=[double, fail])
        return history[-1].text

    events = await collect(sw.Runner().stream(agent))
    assert ("CallStarted", "1#1") in kinds(events)
    assert ("CallFinished", "1#1") in kinds(events)
    assert ("CallFailed", "1#2") in kinds(events)
    started = [e for e in events if isinstance(e, sw.CallStarted)]
    assert started[1].name == "scripted_llm"
    assert started[1].arguments["options"] == ["<policy double>", "<policy fail>"]
    assert events[-1] == sw.RunFinished(events[-1].run_id, "succeeded", "done", None)


async def test_handle_events_stream_a_started_run() -> None:
    gate = asyncio.Event()

    @sw.policy
    async def slow(ctx: sw.Context) -> int:
        await gate.wait()
        ctx.emit("after the gate")
        return 1

    runner = sw.Runner()
    handle = await runner.start(slow)
    stream = handle.events()
    first = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0)
    gate.set()
    events = [await first, *await collect(stream)]
    assert sw.Emitted(handle.run_id, "", "after the gate") in events
    assert isinstance(events[-1], sw.RunFinished) and events[-1].result == 1


async def test_the_stream_of_a_finished_run_ends_with_its_outcome() -> None:
    runner = sw.Runner()
    handle = await runner.start(double, x=21, run_id="d")
    await asyncio.sleep(0.05)  # the run finishes before anyone reads its events
    # The handle start() gave has kept the run's events from its start...
    events = await collect(handle.events())
    assert [type(e) for e in events] == [sw.CallStarted, sw.CallFinished, sw.RunFinished]
    # ...once awaited for its result, or made later, a handle sees only the end.
    second = await runner.start(double, x=1, run_id="e")
    assert await second.result() == 2
    for late in (second, sw.RunHandle(runner, "d")):
        events = await collect(late.events())
        assert len(events) == 1 and isinstance(events[0], sw.RunFinished)
        assert events[0].status == "succeeded"


async def test_a_scripted_model_reply_streams_like_any_call() -> None:
    llm = ScriptedLLM(["hello"])
    events = await collect(sw.Runner().stream(llm, observations=[Message.user("hi")]))
    finished = events[-1]
    assert isinstance(finished, sw.RunFinished)
    assert [m.text for m in finished.result] == ["hello"]


async def test_a_sync_policy_emit_reaches_the_stream_while_it_runs() -> None:
    seen = threading.Event()

    @sw.policy
    def work(ctx: sw.Context) -> bool:
        import time

        time.sleep(0.1)  # let the event loop go idle, waiting for events
        ctx.emit("progress")
        return seen.wait(timeout=1.0)  # the consumer sets it when the event arrives

    runner = sw.Runner(poll_interval=60)  # nothing else wakes the loop
    result = None
    async with asyncio.timeout(5):
        async for ev in runner.stream(work):
            if isinstance(ev, sw.Emitted):
                seen.set()
            if isinstance(ev, sw.RunFinished):
                result = ev.result
    assert result is True
