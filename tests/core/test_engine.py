"""Running policies: step keys, nesting, retries, timeouts, sync policies, run_sync."""

import asyncio
import threading
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.policy import current_context

from ._support import Recorder, collect


# -- running -------------------------------------------------------------------
async def test_run_returns_the_policy_result() -> None:
    @sw.policy
    async def greet(name: str, punct: str = "!") -> str:
        return f"hello {name}{punct}"

    runner = sw.Runner()
    assert await runner.run(greet, "ada") == "hello ada!"
    assert await runner.run(greet, name="bob", punct="?") == "hello bob?"


async def test_a_plain_async_function_runs_without_the_decorator() -> None:
    async def double(x: int) -> int:
        return 2 * x

    assert await sw.Runner().run(double, x=4) == 8


async def test_the_policy_error_reaches_the_caller_unchanged() -> None:
    @sw.policy
    async def boom() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        await sw.Runner().run(boom)
    with pytest.raises(KeyError, match="missing"):  # through a handle too
        await sw.Runner().run(boom, run_id="r1")


async def test_start_returns_a_handle_whose_result_can_be_awaited() -> None:
    gate = asyncio.Event()

    @sw.policy
    async def waits(ctx: sw.Context) -> str:
        await gate.wait()
        return ctx.run_id

    runner = sw.Runner()
    handle = await runner.start(waits, run_id="run-7")
    assert handle.run_id == "run-7"
    assert await handle.status() == "running"
    again = await runner.start(waits, run_id="run-7")  # the id is an idempotency key
    gate.set()
    assert await handle.result() == "run-7"
    assert await again.result() == "run-7"
    assert await handle.status() == "succeeded"


async def test_unknown_run_is_reported() -> None:
    with pytest.raises(sw.RunNotFound):
        await sw.Runner().get_run("nope")


# -- step keys (S1) ---------------------------------------------------------------
@sw.policy
async def leaf(ctx: sw.Context, tag: str) -> tuple[str, str]:
    await asyncio.sleep(0)
    return (tag, ctx.step_key)


@sw.policy
async def middle(ctx: sw.Context, tag: str) -> list[tuple[str, str]]:
    first = await ctx.call(leaf, tag=f"{tag}.a")
    second = await leaf(tag=f"{tag}.b")  # a direct call routes through the engine too
    return [(tag, ctx.step_key), first, second]


async def test_children_of_a_step_get_keys_from_their_parent() -> None:
    @sw.policy
    async def root(ctx: sw.Context) -> list[Any]:
        assert ctx.step_key == ""
        a = await ctx.call(middle, tag="m1")
        b = await ctx.call(leaf, tag="l2")
        c = await middle(tag="m3")
        return [*a, b, *c]

    keys = dict(await sw.Runner().run(root))
    assert keys == {
        "m1": "1",
        "m1.a": "1.1",
        "m1.b": "1.2",
        "l2": "2",
        "m3": "3",
        "m3.a": "3.1",
        "m3.b": "3.2",
    }


@sw.policy
async def fan_out(ctx: sw.Context, n: int) -> list[tuple[str, str]]:
    gathered = await asyncio.gather(*(leaf(tag=f"g{i}") for i in range(n)))
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(ctx.call(middle, tag=f"t{i}")) for i in range(2)]  # type: ignore[arg-type]
    nested = [pair for t in tasks for pair in t.result()]
    return [*gathered, *nested]


async def test_concurrent_calls_get_the_same_keys_on_every_execution() -> None:
    runs = [dict(await sw.Runner().run(fan_out, n=5)) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert runs[0]["g0"] == "1" and runs[0]["g4"] == "5"
    assert runs[0]["t0"] == "6" and runs[0]["t1"] == "7"
    assert runs[0]["t1.a"] == "7.1" and runs[0]["t1.b"] == "7.2"


async def test_keys_are_the_same_when_streamed_and_with_hooks() -> None:
    # The observed path (events, hooks) keys steps exactly like the fast path.
    plain = dict(await sw.Runner().run(fan_out, n=3))
    hooked = dict(await sw.Runner(hooks=[Recorder()]).run(fan_out, n=3))
    events = await collect(sw.Runner().stream(fan_out, n=3))
    started = {
        e.arguments["tag"]: e.key
        for e in events
        if isinstance(e, sw.CallStarted) and e.name in ("leaf", "middle")
    }
    assert plain == hooked
    assert started == plain


async def test_a_direct_call_inside_a_run_is_a_step_and_outside_is_plain() -> None:
    seen: list[tuple[str | None, str]] = []

    @sw.policy
    async def probe(x: int) -> int:
        ctx = current_context()
        seen.append((ctx.step_key if ctx else None, ctx.run_id if ctx else ""))
        return x + 1

    @sw.policy
    async def outer(ctx: sw.Context) -> int:
        return await probe(x=1) + await probe(x=2)

    hook = Recorder()
    runner = sw.Runner(hooks=[hook])
    assert await runner.run(outer, run_id="r") == 5
    assert seen == [("1", "r"), ("2", "r")]
    assert [(k, n) for k, n, _ in hook.of("before")] == [
        ("", "outer"),
        ("1", "probe"),
        ("2", "probe"),
    ]

    seen.clear()
    assert current_context() is None
    assert await probe(x=10) == 11  # outside any run: just runs
    assert seen[0][0] == ""  # its own little root, not a step of anything


# -- retries and timeouts -----------------------------------------------------------
async def test_retries_until_success() -> None:
    attempts = 0

    @sw.policy(retries=3, backoff=0)
    async def flaky() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionError(f"attempt {attempts}")
        return "ok"

    assert await sw.Runner().run(flaky) == "ok"
    assert attempts == 3


async def test_retries_exhausted_raise_the_last_error() -> None:
    attempts = 0

    @sw.policy(retries=2, backoff=0)
    async def always() -> None:
        nonlocal attempts
        attempts += 1
        raise ConnectionError(f"attempt {attempts}")

    hook = Recorder()
    with pytest.raises(ConnectionError, match="attempt 3"):
        await sw.Runner(hooks=[hook]).run(always)
    assert attempts == 3
    assert len(hook.of("before")) == 1 and len(hook.of("error")) == 1  # one call, 3 attempts


async def test_retry_on_filters_the_errors_worth_a_retry() -> None:
    attempts: list[str] = []

    @sw.policy(retries=5, backoff=0, retry_on=(ConnectionError,))
    async def picky(kind: str) -> None:
        attempts.append(kind)
        if kind == "net" and len(attempts) < 3:
            raise ConnectionError("again")
        raise ValueError("not worth a retry")

    with pytest.raises(ValueError):
        await sw.Runner().run(picky, kind="net")
    assert attempts == ["net", "net", "net"]  # 2 retried ConnectionErrors, then the ValueError
    attempts.clear()
    with pytest.raises(ValueError):
        await sw.Runner().run(picky, kind="bad")
    assert attempts == ["bad"]


@pytest.fixture
def delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays ``asyncio.sleep`` is asked for, which then does not wait."""
    asked: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, result: Any = None) -> Any:
        asked.append(delay)
        return await real_sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    return asked


async def test_backoff_doubles_up_to_the_maximum(delays: list[float]) -> None:
    attempts = 0

    @sw.policy(retries=4, backoff=0.5, max_backoff=1.5)
    async def flaky() -> int:
        nonlocal attempts
        attempts += 1
        if attempts <= 4:
            raise OSError("down")
        return attempts

    assert await sw.Runner().run(flaky) == 5
    assert delays == [0.5, 1.0, 1.5, 1.5]


async def test_each_retry_attempt_gets_fresh_child_keys() -> None:
    keys: list[str] = []
    attempts = 0

    @sw.policy
    async def child(ctx: sw.Context) -> None:
        keys.append(ctx.step_key)

    @sw.policy(retries=1, backoff=0)
    async def parent(ctx: sw.Context) -> None:
        nonlocal attempts
        attempts += 1
        await child()
        if attempts == 1:
            raise OSError("retry me")

    @sw.policy
    async def root(ctx: sw.Context) -> None:
        await parent()

    await sw.Runner().run(root)
    assert keys == ["1.1", "1@2.1"]


async def test_timeout_applies_per_call() -> None:
    never = asyncio.Event()

    @sw.policy(timeout=0.01)
    async def stuck() -> None:
        await never.wait()

    @sw.policy
    async def root(ctx: sw.Context) -> str:
        try:
            await stuck()
        except TimeoutError:
            return "timed out"
        return "finished"

    assert await sw.Runner().run(root) == "timed out"
    assert others_are_gone()


async def test_timeout_applies_per_attempt_and_is_retried() -> None:
    never = asyncio.Event()
    attempts = 0

    @sw.policy(timeout=0.01, retries=2, backoff=0)
    async def slow_then_fast() -> int:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            await never.wait()
        return attempts

    assert await sw.Runner().run(slow_then_fast) == 3


async def test_timeout_is_not_retried_when_not_in_retry_on() -> None:
    never = asyncio.Event()
    attempts = 0

    @sw.policy(timeout=0.01, retries=3, backoff=0, retry_on=(ConnectionError,))
    async def stuck() -> None:
        nonlocal attempts
        attempts += 1
        await never.wait()

    with pytest.raises(TimeoutError):
        await sw.Runner().run(stuck)
    assert attempts == 1


async def test_a_timeout_says_which_policy_took_too_long_and_its_own_timeout_error_is_its_own() -> (
    None
):
    never = asyncio.Event()

    @sw.policy(timeout=0.01)
    async def stuck() -> None:
        await never.wait()

    @sw.policy(timeout=30)
    async def gives_up() -> None:
        raise TimeoutError("the upstream gave up")

    with pytest.raises(TimeoutError) as ours:
        await sw.Runner().run(stuck)
    assert str(ours.value) == "stuck took longer than its timeout of 0.01 s"
    with pytest.raises(TimeoutError) as its_own:
        await sw.Runner().run(gives_up)
    assert str(its_own.value) == "the upstream gave up"


async def test_a_retried_policy_with_a_timeout_gets_its_context_on_every_attempt() -> None:
    seen: list[str] = []

    @sw.policy(retries=1, backoff=0, timeout=30)
    async def careful(ctx: sw.Context, n: int) -> int:
        seen.append(ctx.step_key)
        if len(seen) == 1:
            raise OSError("once")
        return n

    @sw.policy
    async def root(ctx: sw.Context) -> int:
        return await careful(4)

    assert await sw.Runner().run(root) == 4
    assert seen == ["1", "1@2"]


async def test_a_veto_is_never_retried() -> None:
    attempts = 0

    @sw.policy(retries=3, backoff=0)
    async def vetoed() -> None:
        nonlocal attempts
        attempts += 1
        raise sw.Veto("not allowed here")

    with pytest.raises(sw.Veto, match="not allowed here"):
        await sw.Runner().run(vetoed)
    assert attempts == 1


async def test_each_retry_is_announced_with_the_error_it_follows() -> None:
    hook = Recorder()

    @sw.policy(retries=1, backoff=0)
    async def flaky_once() -> str:
        if not hook.of("retry"):
            raise ConnectionError("first attempt")
        return "second"

    assert await sw.Runner(hooks=[hook]).run(flaky_once) == "second"
    [(key, name, (attempt, error))] = hook.of("retry")
    assert (key, name, attempt) == ("", "flaky_once", 2)  # the attempt that follows
    assert isinstance(error, ConnectionError) and str(error) == "first attempt"


async def test_no_pause_between_attempts_when_the_backoff_is_zero(delays: list[float]) -> None:
    attempts = 0

    @sw.policy(retries=2, backoff=0)
    async def flaky() -> int:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise OSError("down")
        return attempts

    assert await sw.Runner().run(flaky) == 3
    assert delays == []


async def test_in_memory_a_policy_taking_its_context_gets_its_positional_arguments() -> None:
    @sw.policy
    async def scaled(ctx: sw.Context, n: int, by: int = 1) -> tuple[str, int]:
        return ctx.step_key, n * by

    @sw.policy
    async def root(ctx: sw.Context) -> list[tuple[str, int]]:
        return [await scaled(3), await scaled(3, 2), await ctx.call(scaled, 5, by=3)]

    assert await sw.Runner().run(root) == [("1", 3), ("2", 6), ("3", 15)]


async def test_in_memory_a_cancelled_run_is_not_caught_by_its_policys_except_exception() -> None:
    started = asyncio.Event()
    never = asyncio.Event()
    swallowed: list[BaseException] = []

    @sw.policy
    async def waits() -> None:
        started.set()
        await never.wait()

    @sw.policy
    async def root(ctx: sw.Context) -> str:
        try:
            await waits()
        except Exception as exc:  # a policy's broad handler must not catch the cancel
            swallowed.append(exc)
            return "carried on"
        return "finished"

    task = asyncio.ensure_future(sw.Runner().run(root))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert swallowed == []


def others_are_gone() -> bool:
    current = asyncio.current_task()
    return all(t is current or t.done() for t in asyncio.all_tasks())


# -- sync policies ------------------------------------------------------------------
async def test_a_sync_policy_runs_off_the_event_loop() -> None:
    loop_ran = threading.Event()

    @sw.policy
    def blocking(label: str) -> str:
        # Blocks its thread until a task on the event loop sets the flag: if the
        # policy ran on the loop, that task could never run.
        assert loop_ran.wait(timeout=5), "the event loop was blocked by a sync policy"
        return label.upper()

    async def ticker() -> None:
        await asyncio.sleep(0)
        loop_ran.set()

    tick = asyncio.create_task(ticker())
    assert await sw.Runner().run(blocking, "done") == "DONE"
    await tick


async def test_sync_policies_run_concurrently_as_children() -> None:
    barrier = threading.Barrier(3, timeout=5)

    @sw.policy
    def part(i: int) -> int:
        barrier.wait()  # all three must be running at once to pass
        return i * i

    @sw.policy
    async def root(ctx: sw.Context) -> list[int]:
        return list(await asyncio.gather(*(part(i) for i in range(3))))

    assert await sw.Runner().run(root) == [0, 1, 4]


async def test_a_sync_policy_gets_its_context_and_its_errors_propagate() -> None:
    @sw.policy
    def keyed(ctx: sw.Context, x: int) -> str:
        return f"{ctx.step_key}:{x}"

    @sw.policy
    def fails() -> None:
        raise RuntimeError("sync failure")

    @sw.policy
    async def root(ctx: sw.Context) -> str:
        with pytest.raises(RuntimeError, match="sync failure"):
            await fails()
        return await keyed(x=3)

    assert await sw.Runner().run(root) == "2:3"


def test_run_sync_runs_from_synchronous_code() -> None:
    @sw.policy
    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    @sw.policy
    def mul(a: int, b: int) -> int:
        return a * b

    assert sw.Runner().run_sync(add, 2, b=3) == 5
    assert sw.Runner().run_sync(mul, a=4, b=5) == 20
    with pytest.raises(ZeroDivisionError):
        sw.Runner().run_sync(lambda: 1 / 0)


# -- class policies -----------------------------------------------------------------
class Counter:
    """Counts its calls; the instance keeps its state."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, ctx: sw.Context, step: int = 1) -> tuple[int, str]:
        self.calls += step
        return (self.calls, ctx.step_key)


async def test_a_class_policy_runs_as_a_root_and_as_a_step() -> None:
    counter = Counter()
    counted = sw.policy(counter)

    @sw.policy
    async def root(ctx: sw.Context) -> list[tuple[int, str]]:
        return [await counted(step=2), await ctx.call(counter, step=3)]

    assert await sw.Runner().run(counter) == (1, "")
    assert await sw.Runner().run(root) == [(3, "1"), (6, "2")]
    assert counter.calls == 6


async def test_nested_errors_propagate_through_every_level() -> None:
    @sw.policy
    async def bottom() -> None:
        raise LookupError("deep")

    @sw.policy
    async def mid() -> None:
        await bottom()

    @sw.policy
    async def top() -> None:
        await mid()

    with pytest.raises(LookupError, match="deep"):
        await sw.Runner().run(top)
