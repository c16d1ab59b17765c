"""A node's life: prep → exec → post, retries, waits, fallback, run() rules."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from stalwart.flow import AsyncFlow, AsyncNode, BaseNode, Flow, Node

from ._helpers import Caught


class Recorder(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[tuple[str, Any]] = []

    def prep(self, shared: Any) -> Any:
        self.calls.append(("prep", shared))
        return shared["x"] + 1

    def exec(self, prep_res: Any) -> Any:
        self.calls.append(("exec", prep_res))
        return prep_res * 10

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        self.calls.append(("post", (prep_res, exec_res)))
        shared["out"] = exec_res
        return "done"


def test_life_order_arguments_and_run_returns_post_result(caught: Caught) -> None:
    node = Recorder()
    shared = {"x": 1}
    assert node.run(shared) == "done"
    assert node.calls == [("prep", shared), ("exec", 2), ("post", (2, 20))]
    assert node.calls[0][1] is shared
    assert shared["out"] == 20
    assert caught.messages == []


def test_base_node_defaults_do_nothing() -> None:
    assert BaseNode().run({}) is None
    assert Node().run({}) is None


def test_defaults() -> None:
    node = Node()
    assert node.max_retries == 1
    assert node.wait == 0
    assert node.params == {}
    assert node.successors == {}


class Flaky(Node):
    """Fails `fails` times, recording the object and cur_retry of each attempt."""

    def __init__(self, fails: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fails = fails
        self.attempts: list[tuple[int, int]] = []
        self.preps = 0
        self.posts: list[Any] = []

    def prep(self, shared: Any) -> Any:
        self.preps += 1
        return "p"

    def exec(self, prep_res: Any) -> Any:
        self.attempts.append((id(self), self.cur_retry))
        if len(self.attempts) <= self.fails:
            raise ValueError(f"fail {len(self.attempts)}")
        return f"ok after {self.cur_retry}"

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        self.posts.append(exec_res)
        return exec_res


def test_retries_only_exec_on_same_object_counting_cur_retry_from_zero() -> None:
    node = Flaky(fails=2, max_retries=3)
    assert node.run({}) == "ok after 2"
    assert node.attempts == [(id(node), 0), (id(node), 1), (id(node), 2)]
    assert node.preps == 1
    assert node.posts == ["ok after 2"]


def test_success_first_time_makes_one_attempt() -> None:
    node = Flaky(fails=0, max_retries=5)
    assert node.run({}) == "ok after 0"
    assert [r for _, r in node.attempts] == [0]


def test_default_max_retries_is_one_attempt_then_reraise() -> None:
    node = Flaky(fails=1)
    with pytest.raises(ValueError, match="fail 1"):
        node.run({})
    assert len(node.attempts) == 1
    assert node.posts == []


def test_default_fallback_reraises_the_last_exception_itself() -> None:
    errors: list[Exception] = []

    class Failing(Node):
        def exec(self, prep_res: Any) -> Any:
            errors.append(RuntimeError(f"attempt {self.cur_retry}"))
            raise errors[-1]

    with pytest.raises(RuntimeError) as info:
        Failing(max_retries=3).run({})
    assert info.value is errors[-1]
    assert str(info.value) == "attempt 2"


def test_fallback_gets_prep_res_and_exception_and_its_result_is_exec_res() -> None:
    seen: list[Any] = []

    class WithFallback(Flaky):
        def exec_fallback(self, prep_res: Any, exc: Exception) -> Any:
            seen.append((prep_res, str(exc), self.cur_retry))
            return "fallback"

    node = WithFallback(fails=10, max_retries=3)
    assert node.run({}) == "fallback"
    assert seen == [("p", "fail 3", 2)]
    assert node.posts == ["fallback"]
    assert len(node.attempts) == 3


def test_fallback_not_called_when_a_retry_succeeds() -> None:
    class WithFallback(Flaky):
        def exec_fallback(self, prep_res: Any, exc: Exception) -> Any:
            raise AssertionError("must not be called")

    assert WithFallback(fails=1, max_retries=2).run({}) == "ok after 1"


def test_fallback_raising_propagates_its_own_error() -> None:
    class Wrapping(Flaky):
        def exec_fallback(self, prep_res: Any, exc: Exception) -> Any:
            raise KeyError("wrapped") from exc

    with pytest.raises(KeyError, match="wrapped"):
        Wrapping(fails=5, max_retries=2).run({})


def test_zero_max_retries_makes_no_attempt_like_pocketflow() -> None:
    node = Flaky(fails=0, max_retries=0)
    assert node.run({}) is None
    assert node.attempts == []
    assert node.posts == [None]


def test_wait_sleeps_between_attempts_only(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    node = Flaky(fails=10, max_retries=4, wait=0.25)
    with pytest.raises(ValueError):
        node.run({})
    assert sleeps == [0.25, 0.25, 0.25]  # between 4 attempts; none after the last


def test_no_wait_after_success(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    Flaky(fails=1, max_retries=4, wait=0.5).run({})
    assert sleeps == [0.5]


def test_wait_zero_never_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: pytest.fail("slept"))
    with pytest.raises(ValueError):
        Flaky(fails=10, max_retries=3).run({})


def test_wait_really_passes_between_attempts() -> None:
    stamps: list[float] = []

    class Stamped(Node):
        def exec(self, prep_res: Any) -> Any:
            stamps.append(time.perf_counter())
            if len(stamps) < 3:
                raise ValueError
            return "ok"

    assert Stamped(max_retries=3, wait=0.03).run({}) is None
    assert len(stamps) == 3
    assert stamps[1] - stamps[0] >= 0.025
    assert stamps[2] - stamps[1] >= 0.025


def test_retry_catches_exceptions_not_base_exceptions() -> None:
    class Interrupted(Node):
        attempts = 0

        def exec(self, prep_res: Any) -> Any:
            self.attempts += 1
            raise KeyboardInterrupt

    node = Interrupted(max_retries=3)
    with pytest.raises(KeyboardInterrupt):
        node.run({})
    assert node.attempts == 1


# --- run() on a node with successors ---------------------------------------


def test_run_with_successors_warns_and_runs_node_alone(caught: Caught) -> None:
    ran: list[str] = []

    class Mark(Node):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            ran.append(self.name)
            return "default"

    a = Mark("a")
    a >> Mark("b")
    assert a.run({}) == "default"
    assert ran == ["a"]
    assert caught.messages == ["Node won't run successors. Use Flow."]
    assert caught.categories == [UserWarning]


def test_run_without_successors_does_not_warn(caught: Caught) -> None:
    Node().run({})
    assert caught.messages == []


def test_flow_run_with_successors_warns_use_flow(caught: Caught) -> None:
    flow = Flow(start=Node())
    flow >> Node()
    flow.run({})
    assert caught.messages == ["Node won't run successors. Use Flow."]


# --- async nodes ---------------------------------------------------------


class AsyncRecorder(AsyncNode):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[tuple[str, Any]] = []

    async def prep_async(self, shared: Any) -> Any:
        self.calls.append(("prep", shared["x"]))
        return shared["x"] + 1

    async def exec_async(self, prep_res: Any) -> Any:
        await asyncio.sleep(0)
        self.calls.append(("exec", prep_res))
        return prep_res * 10

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        self.calls.append(("post", (prep_res, exec_res)))
        return "async done"


async def test_async_life(caught: Caught) -> None:
    node = AsyncRecorder()
    assert await node.run_async({"x": 1}) == "async done"
    assert node.calls == [("prep", 1), ("exec", 2), ("post", (2, 20))]
    assert caught.messages == []


async def test_async_defaults_do_nothing() -> None:
    assert await AsyncNode().run_async({}) is None


async def test_async_run_with_successors_warns_use_async_flow(caught: Caught) -> None:
    node = AsyncRecorder()
    node >> AsyncRecorder()
    assert await node.run_async({"x": 1}) == "async done"
    assert caught.messages == ["Node won't run successors. Use AsyncFlow."]


async def test_async_flow_run_async_with_successors_warns(caught: Caught) -> None:
    flow = AsyncFlow(start=AsyncNode())
    flow >> AsyncNode()
    await flow.run_async({})
    assert caught.messages == ["Node won't run successors. Use AsyncFlow."]


def test_run_on_async_node_raises() -> None:
    with pytest.raises(RuntimeError) as info:
        AsyncRecorder().run({"x": 1})
    assert str(info.value) == "Use run_async."


def test_private_run_on_async_node_raises() -> None:
    with pytest.raises(RuntimeError, match=r"^Use run_async\.$"):
        AsyncRecorder()._run({"x": 1})


def test_run_on_async_node_with_successors_warns_then_raises(caught: Caught) -> None:
    node = AsyncNode()
    node >> AsyncNode()
    with pytest.raises(RuntimeError, match=r"^Use run_async\.$"):
        node.run({})
    assert caught.messages == ["Node won't run successors. Use Flow."]


def test_async_node_in_sync_flow_raises() -> None:
    first = Node()
    first >> AsyncRecorder()
    with pytest.raises(RuntimeError, match=r"^Use run_async\.$"):
        Flow(start=first).run({"x": 1})


def test_async_flow_cannot_run_synchronously() -> None:
    with pytest.raises(RuntimeError, match=r"^Use run_async\.$"):
        AsyncFlow(start=Node()).run({})
    with pytest.raises(RuntimeError, match=r"^Use run_async\.$"):
        Flow(start=AsyncFlow(start=Node())).run({})


class AsyncFlaky(AsyncNode):
    def __init__(self, fails: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fails = fails
        self.attempts: list[tuple[int, int]] = []

    async def exec_async(self, prep_res: Any) -> Any:
        self.attempts.append((id(self), self.cur_retry))
        if len(self.attempts) <= self.fails:
            raise ValueError(f"fail {len(self.attempts)}")
        return "ok"

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        return exec_res


async def test_async_retries_with_cur_retry_on_same_object() -> None:
    node = AsyncFlaky(fails=2, max_retries=3)
    assert await node.run_async({}) == "ok"
    assert node.attempts == [(id(node), 0), (id(node), 1), (id(node), 2)]


async def test_async_default_fallback_reraises() -> None:
    node = AsyncFlaky(fails=5, max_retries=2)
    with pytest.raises(ValueError, match="fail 2"):
        await node.run_async({})
    assert len(node.attempts) == 2


async def test_async_fallback_result_becomes_exec_res() -> None:
    class WithFallback(AsyncFlaky):
        async def exec_fallback_async(self, prep_res: Any, exc: Exception) -> Any:
            return f"fallback: {exc} at {self.cur_retry}"

    assert await WithFallback(fails=9, max_retries=2).run_async({}) == "fallback: fail 2 at 1"


async def test_async_wait_uses_asyncio_sleep_not_time_sleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: pytest.fail("blocked the loop"))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    start = time.perf_counter()
    node = AsyncFlaky(fails=2, max_retries=3, wait=0.04)
    assert await node.run_async({}) == "ok"
    elapsed = time.perf_counter() - start
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert elapsed >= 0.075  # two waits between three attempts
    assert ticks >= 3  # the loop kept running while the node waited
