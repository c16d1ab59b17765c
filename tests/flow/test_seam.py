"""The seam a durable layer hooks into: every call into user code."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from stalwart.flow import (
    AsyncFlow,
    AsyncNode,
    AsyncParallelBatchFlow,
    AsyncParallelBatchNode,
    BaseNode,
    BatchFlow,
    BatchNode,
    Flow,
    Node,
)
from stalwart.flow._seam import current_hook, use_hook

T = TypeVar("T")


class Recording:
    """Passes every call through, noting (kind, node name, phase, index, args)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, int]] = []

    def _name(self, node: BaseNode) -> str:
        return getattr(node, "name", type(node).__name__)

    def call(
        self, node: BaseNode, phase: Any, index: int, fn: Callable[..., T], args: tuple[Any, ...]
    ) -> T:
        self.calls.append(("sync", self._name(node), phase, index))
        return fn(*args)

    def call_async(
        self,
        node: BaseNode,
        phase: Any,
        index: int,
        fn: Callable[..., Awaitable[T]],
        args: tuple[Any, ...],
    ) -> Awaitable[T]:
        self.calls.append(("async", self._name(node), phase, index))
        return fn(*args)


class Named(Node):
    def __init__(self, name: str, action: Any = None) -> None:
        super().__init__()
        self.name = name
        self.action = action

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        return self.action


class AsyncNamed(AsyncNode):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


def test_no_hook_by_default() -> None:
    assert current_hook.get() is None


def test_sync_flow_calls_pass_through_the_hook_in_order() -> None:
    a, b = Named("a", "next"), Named("b")
    a - "next" >> b
    flow = Flow(start=a)
    flow.name = "flow"  # type: ignore[attr-defined]
    hook = Recording()
    with use_hook(hook):
        assert flow.run({}) is None
    assert hook.calls == [
        ("sync", "flow", "prep", 0),
        ("sync", "flow", "walk", 0),
        ("sync", "a", "prep", 0),
        ("sync", "a", "exec", 0),
        ("sync", "a", "post", 0),
        ("sync", "b", "prep", 0),
        ("sync", "b", "exec", 0),
        ("sync", "b", "post", 0),
        ("sync", "flow", "post", 0),
    ]
    assert current_hook.get() is None


def test_each_batch_item_and_each_batch_walk_has_its_index() -> None:
    class Items(BatchNode):
        name = "items"

        def prep(self, shared: Any) -> Any:
            return ["x", "y", "z"]

    class Walks(BatchFlow):
        name = "walks"

        def prep(self, shared: Any) -> Any:
            return [{"i": 0}, {"i": 1}]

    hook = Recording()
    with use_hook(hook):
        Walks(start=Items()).run({})
    execs = [(n, i) for _, n, p, i in hook.calls if p in ("exec", "walk")]
    assert execs == [
        ("walks", 0), ("items", 0), ("items", 1), ("items", 2),
        ("walks", 1), ("items", 0), ("items", 1), ("items", 2),
    ]  # fmt: skip


def test_exec_goes_through_the_hook_once_around_all_retries() -> None:
    class Flaky(Node):
        name = "flaky"
        attempts = 0

        def exec(self, prep_res: Any) -> Any:
            self.attempts += 1
            if self.attempts < 3:
                raise ValueError
            return "ok"

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            return exec_res

    hook = Recording()
    with use_hook(hook):
        assert Flaky(max_retries=3).run({}) == "ok"
    assert [p for _, _, p, _ in hook.calls] == ["prep", "exec", "post"]


async def test_async_flow_uses_async_kind_for_async_nodes_and_sync_kind_for_sync() -> None:
    flow = AsyncFlow(start=AsyncNamed("a"))
    flow.start_node >> Named("s")  # type: ignore[operator]
    flow.name = "flow"  # type: ignore[attr-defined]
    hook = Recording()
    with use_hook(hook):
        await flow.run_async({})
    assert hook.calls == [
        ("async", "flow", "prep", 0),
        ("async", "flow", "walk", 0),
        ("async", "a", "prep", 0),
        ("async", "a", "exec", 0),
        ("async", "a", "post", 0),
        ("sync", "s", "prep", 0),
        ("sync", "s", "exec", 0),
        ("sync", "s", "post", 0),
        ("async", "flow", "post", 0),
    ]


async def test_parallel_calls_enter_the_hook_in_item_order() -> None:
    class Items(AsyncParallelBatchNode):
        name = "items"

        async def prep_async(self, shared: Any) -> Any:
            return [3, 2, 1]

        async def exec_async(self, item: Any) -> Any:
            await asyncio.sleep(0.001 * item)
            return item

    class Fan(AsyncParallelBatchFlow):
        name = "fan"

        async def prep_async(self, shared: Any) -> Any:
            return [{"w": 0}, {"w": 1}]

    hook = Recording()
    with use_hook(hook):
        await Fan(start=Items()).run_async({})
    walks = [(n, i) for _, n, p, i in hook.calls if p == "walk"]
    assert walks == [("fan", 0), ("fan", 1)]
    item_execs = [i for _, n, p, i in hook.calls if n == "items" and p == "exec"]
    assert item_execs == [0, 1, 2, 0, 1, 2]


class Replaying(Recording):
    """A toy durable layer: exec results are journaled and answered on replay."""

    def __init__(self, journal: dict[tuple[str, int, int], Any]) -> None:
        super().__init__()
        self.journal = journal
        self.seq: dict[str, int] = {}

    def call(
        self, node: BaseNode, phase: Any, index: int, fn: Callable[..., T], args: tuple[Any, ...]
    ) -> T:
        if phase != "exec":
            return fn(*args)
        name = self._name(node)
        visit = self.seq.get(name, 0)
        if index == 0:
            self.seq[name] = visit = visit + 1
        key = (name, visit, index)
        if key in self.journal:
            return self.journal[key]  # type: ignore[no-any-return]
        result = fn(*args)
        self.journal[key] = result
        return result


def test_a_hook_can_journal_and_replay_exec_without_running_it() -> None:
    runs: list[Any] = []

    class Expensive(BatchNode):
        name = "expensive"

        def prep(self, shared: Any) -> Any:
            return shared["items"]

        def exec(self, item: Any) -> Any:
            runs.append(item)
            if item == shared.get("crash_on"):
                raise RuntimeError("crash")
            return item * 100

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["out"] = exec_res

    journal: dict[tuple[str, int, int], Any] = {}
    shared: dict[str, Any] = {"items": [1, 2, 3], "crash_on": 3}
    with use_hook(Replaying(journal)), pytest.raises(RuntimeError):
        Flow(start=Expensive()).run(shared)
    assert runs == [1, 2, 3]

    shared["crash_on"] = None
    runs.clear()
    with use_hook(Replaying(journal)):
        Flow(start=Expensive()).run(shared)
    assert runs == [3]  # finished items are answered from the journal
    assert shared["out"] == [100, 200, 300]


async def test_hook_is_per_context_so_concurrent_flows_do_not_share_it() -> None:
    class Tick(AsyncNode):
        name = "tick"

        async def exec_async(self, prep_res: Any) -> Any:
            await asyncio.sleep(0.005)

    hooked = Recording()

    async def with_hook() -> None:
        with use_hook(hooked):
            await AsyncFlow(start=Tick()).run_async({})

    async def without_hook() -> None:
        await asyncio.sleep(0)
        assert current_hook.get() is None
        await AsyncFlow(start=Tick()).run_async({})

    await asyncio.gather(with_hook(), without_hook())
    assert len(hooked.calls) == 6  # only the hooked flow's calls


def test_use_hook_restores_the_previous_hook_after_errors() -> None:
    outer, inner = Recording(), Recording()
    with use_hook(outer):
        with pytest.raises(ZeroDivisionError), use_hook(inner):
            raise ZeroDivisionError
        assert current_hook.get() is outer
        with use_hook(None):
            assert current_hook.get() is None
    assert current_hook.get() is None
