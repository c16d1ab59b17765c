"""Batch nodes and batch flows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from stalwart.flow import (
    AsyncBatchFlow,
    AsyncBatchNode,
    AsyncFlow,
    AsyncNode,
    AsyncParallelBatchFlow,
    AsyncParallelBatchNode,
    BatchFlow,
    BatchNode,
    Flow,
    Node,
)

from ._helpers import Caught

# --- BatchNode -----------------------------------------------------------


class Squares(BatchNode):
    def prep(self, shared: Any) -> Any:
        return shared["items"]

    def exec(self, item: Any) -> Any:
        return item * item

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared["result"] = (prep_res, exec_res)
        return "done"


def test_batch_node_runs_exec_per_item_in_order(caught: Caught) -> None:
    shared: dict[str, Any] = {"items": [3, 1, 2]}
    assert Squares().run(shared) == "done"
    assert shared["result"] == ([3, 1, 2], [9, 1, 4])
    assert caught.messages == []


@pytest.mark.parametrize("items", [None, []])
def test_batch_node_none_or_empty_means_no_items(items: Any) -> None:
    shared: dict[str, Any] = {"items": items}
    Squares().run(shared)
    assert shared["result"] == (items, [])


def test_batch_node_retries_each_item_with_its_own_count() -> None:
    class Flaky(BatchNode):
        def __init__(self) -> None:
            super().__init__(max_retries=3)
            self.tries: list[tuple[str, int]] = []

        def prep(self, shared: Any) -> Any:
            return ["a", "b"]

        def exec(self, item: Any) -> Any:
            self.tries.append((item, self.cur_retry))
            if item == "a" and self.cur_retry < 2:
                raise ValueError
            return item.upper()

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            return exec_res

    node = Flaky()
    assert node.run({}) == ["A", "B"]
    assert node.tries == [("a", 0), ("a", 1), ("a", 2), ("b", 0)]


def test_batch_node_fallback_per_item() -> None:
    class Fallback(BatchNode):
        def prep(self, shared: Any) -> Any:
            return [1, 0, 2]

        def exec(self, item: Any) -> Any:
            return 10 // item

        def exec_fallback(self, prep_res: Any, exc: Exception) -> Any:
            return f"fallback for {prep_res}"

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            return exec_res

    assert Fallback().run({}) == [10, "fallback for 0", 5]


def test_batch_node_exception_propagates_and_stops() -> None:
    seen: list[int] = []

    class Fails(BatchNode):
        def prep(self, shared: Any) -> Any:
            return [1, 2, 3]

        def exec(self, item: Any) -> Any:
            seen.append(item)
            if item == 2:
                raise KeyError(item)
            return item

    with pytest.raises(KeyError):
        Fails().run({})
    assert seen == [1, 2]


def test_batch_node_inside_a_flow() -> None:
    shared: dict[str, Any] = {"items": [1, 2]}
    after = Node()
    start = Squares()
    start - "done" >> after
    Flow(start=start).run(shared)
    assert shared["result"] == ([1, 2], [1, 4])


# --- async batch nodes ---------------------------------------------------


class Concurrency:
    """Counts how many items are inside exec at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    async def around(self, delay: float) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(delay)
        await asyncio.sleep(0)  # every started item is inside at once, if they overlap
        self.now -= 1


def make_async_batch(base: type[AsyncNode], gauge: Concurrency) -> AsyncNode:
    class Doubler(base):  # type: ignore[valid-type, misc]
        async def prep_async(self, shared: Any) -> Any:
            return shared["items"]

        async def exec_async(self, item: Any) -> Any:
            await gauge.around(0)
            if base is AsyncParallelBatchNode:
                # Later items finish first (an item waits for the next one),
                # so completion order is reversed: results still come in order.
                while item < 4 and item + 1 not in shared_order:
                    await asyncio.sleep(0)
            shared_order.append(item)
            return item * 2

        async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["result"] = exec_res
            return "done"

    shared_order: list[int] = []
    node = Doubler()
    node.finish_order = shared_order
    return node


async def test_async_batch_node_runs_items_one_after_another_in_order() -> None:
    gauge = Concurrency()
    node = make_async_batch(AsyncBatchNode, gauge)
    shared: dict[str, Any] = {"items": [1, 2, 3, 4]}
    assert await node.run_async(shared) == "done"
    assert shared["result"] == [2, 4, 6, 8]
    assert gauge.peak == 1
    assert node.finish_order == [1, 2, 3, 4]  # type: ignore[attr-defined]


async def test_async_parallel_batch_node_runs_items_together_results_in_item_order() -> None:
    gauge = Concurrency()
    node = make_async_batch(AsyncParallelBatchNode, gauge)
    shared: dict[str, Any] = {"items": [1, 2, 3, 4]}
    assert await node.run_async(shared) == "done"
    assert shared["result"] == [2, 4, 6, 8]
    assert gauge.peak == 4
    assert node.finish_order == [4, 3, 2, 1]  # type: ignore[attr-defined]


@pytest.mark.parametrize("base", [AsyncBatchNode, AsyncParallelBatchNode])
async def test_async_batch_nodes_take_an_empty_list(base: type[AsyncNode]) -> None:
    shared: dict[str, Any] = {"items": []}
    await make_async_batch(base, Concurrency()).run_async(shared)
    assert shared["result"] == []


@pytest.mark.parametrize("base", [AsyncBatchNode, AsyncParallelBatchNode])
async def test_async_batch_nodes_raise_type_error_when_prep_returns_none(
    base: type[AsyncNode],
) -> None:
    shared: dict[str, Any] = {"items": None}
    with pytest.raises(TypeError):
        await make_async_batch(base, Concurrency()).run_async(shared)
    assert "result" not in shared


@pytest.mark.parametrize("base", [AsyncBatchNode, AsyncParallelBatchNode])
async def test_async_batch_node_exceptions_propagate(base: type[AsyncNode]) -> None:
    class Fails(base):  # type: ignore[valid-type, misc]
        async def prep_async(self, shared: Any) -> Any:
            return [1, 2, 3]

        async def exec_async(self, item: Any) -> Any:
            if item == 2:
                raise ValueError(f"item {item}")
            return item

    with pytest.raises(ValueError, match="item 2"):
        await Fails().run_async({})


@pytest.mark.parametrize("base", [AsyncBatchNode, AsyncParallelBatchNode])
async def test_async_batch_node_retries_and_fallback_per_item(base: type[AsyncNode]) -> None:
    class Retrying(base):  # type: ignore[valid-type, misc]
        async def prep_async(self, shared: Any) -> Any:
            return [0, 1, 2]

        async def exec_async(self, item: Any) -> Any:
            if item == 1:
                raise ValueError("never")
            if item == 2 and self.tries.setdefault(item, 0) < 1:
                self.tries[item] += 1
                raise ValueError("once")
            return item

        async def exec_fallback_async(self, prep_res: Any, exc: Exception) -> Any:
            return f"fb {prep_res}: {exc}"

        async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            return exec_res

    node = Retrying(max_retries=2)
    node.tries = {}
    assert await node.run_async({}) == [0, "fb 1: never", 2]


async def test_async_batch_nodes_run_inside_async_flow() -> None:
    node = make_async_batch(AsyncParallelBatchNode, Concurrency())
    shared: dict[str, Any] = {"items": [5, 6]}
    assert await AsyncFlow(start=node).run_async(shared) == "done"
    assert shared["result"] == [10, 12]


# --- BatchFlow -----------------------------------------------------------


class Collect(Node):
    """Records the params it runs with."""

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared.setdefault("seen", []).append(dict(self.params))
        return None


class AsyncCollect(AsyncNode):
    async def exec_async(self, prep_res: Any) -> Any:
        await asyncio.sleep(0.001 * (5 - self.params.get("i", 0)))

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared.setdefault("seen", []).append(dict(self.params))
        return None


def batch_flow(base: type[Any], items: Any, start: Any) -> Any:
    calls: list[Any] = []

    if issubclass(base, AsyncFlow):

        class AsyncBatch(base):  # type: ignore[valid-type, misc]
            async def prep_async(self, shared: Any) -> Any:
                return items

            async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
                calls.append((prep_res, exec_res))
                return "batch done"

        flow = AsyncBatch(start=start)
    else:

        class SyncBatch(base):  # type: ignore[valid-type, misc]
            def prep(self, shared: Any) -> Any:
                return items

            def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
                calls.append((prep_res, exec_res))
                return "batch done"

        flow = SyncBatch(start=start)
    flow.post_calls = calls
    return flow


def test_batch_flow_runs_subflow_per_dict_in_order_with_item_winning(caught: Caught) -> None:
    first, second = Collect(), Collect()
    first >> second
    items = [{"i": 1, "shared": "item"}, {"i": 2}]
    flow = batch_flow(BatchFlow, items, first)
    flow.set_params({"shared": "flow", "base": True})
    shared: dict[str, Any] = {}
    assert flow.run(shared) == "batch done"
    expected_1 = {"shared": "item", "base": True, "i": 1}
    expected_2 = {"shared": "flow", "base": True, "i": 2}
    assert shared["seen"] == [expected_1, expected_1, expected_2, expected_2]
    assert flow.post_calls == [(items, None)]
    assert flow.params == {"shared": "flow", "base": True}
    assert items == [{"i": 1, "shared": "item"}, {"i": 2}]
    assert caught.messages == []


@pytest.mark.parametrize("items", [None, []])
def test_batch_flow_empty_or_none_runs_nothing(items: Any) -> None:
    flow = batch_flow(BatchFlow, items, Collect())
    shared: dict[str, Any] = {}
    assert flow.run(shared) == "batch done"
    assert "seen" not in shared
    assert flow.post_calls == [([], None)]


@pytest.mark.parametrize("base", [AsyncBatchFlow, AsyncParallelBatchFlow])
@pytest.mark.parametrize("items", [None, []])
async def test_async_batch_flows_empty_or_none_run_nothing(base: type[Any], items: Any) -> None:
    flow = batch_flow(base, items, AsyncCollect())
    shared: dict[str, Any] = {}
    assert await flow.run_async(shared) == "batch done"
    assert "seen" not in shared
    assert flow.post_calls == [([], None)]


async def test_async_batch_flow_runs_in_order() -> None:
    items = [{"i": i} for i in range(1, 5)]
    flow = batch_flow(AsyncBatchFlow, items, AsyncCollect())
    flow.set_params({"base": 0})
    shared: dict[str, Any] = {}
    await flow.run_async(shared)
    assert shared["seen"] == [{"base": 0, "i": i} for i in range(1, 5)]
    assert flow.post_calls == [(items, None)]


class ReverseCollect(AsyncNode):
    """Item i finishes only after item i + 1 has: possible only if walks overlap."""

    done: dict[int, asyncio.Event] = {}

    async def exec_async(self, prep_res: Any) -> Any:
        i = self.params["i"]
        if i < 4:
            async with asyncio.timeout(5):  # a sequential walk would wait here for ever
                await self.done.setdefault(i + 1, asyncio.Event()).wait()

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared.setdefault("seen", []).append(dict(self.params))
        self.done.setdefault(self.params["i"], asyncio.Event()).set()


async def test_async_parallel_batch_flow_runs_walks_concurrently() -> None:
    ReverseCollect.done = {}
    items = [{"i": i} for i in range(1, 5)]
    flow = batch_flow(AsyncParallelBatchFlow, items, ReverseCollect())
    flow.set_params({"base": 0})
    shared: dict[str, Any] = {}
    await flow.run_async(shared)
    assert shared["seen"] == [{"base": 0, "i": i} for i in range(4, 0, -1)]
    assert flow.post_calls == [(items, None)]


async def test_async_batch_flow_runs_sync_nodes_too() -> None:
    items = [{"i": 1}, {"i": 2}]
    flow = batch_flow(AsyncBatchFlow, items, Collect())
    shared: dict[str, Any] = {}
    await flow.run_async(shared)
    assert shared["seen"] == items


def test_nested_batch_flows_merge_params_of_every_level() -> None:
    inner = batch_flow(BatchFlow, [{"y": 1}, {"y": 2, "level": "inner"}], Collect())
    outer = batch_flow(BatchFlow, [{"x": "a", "level": "outer"}, {"x": "b"}], inner)
    outer.set_params({"level": "top", "top": True})
    shared: dict[str, Any] = {}
    outer.run(shared)
    assert shared["seen"] == [
        {"level": "outer", "top": True, "x": "a", "y": 1},
        {"level": "inner", "top": True, "x": "a", "y": 2},
        {"level": "top", "top": True, "x": "b", "y": 1},
        {"level": "inner", "top": True, "x": "b", "y": 2},
    ]
    assert outer.params == {"level": "top", "top": True}


@pytest.mark.parametrize("outer_base", [AsyncBatchFlow, AsyncParallelBatchFlow])
@pytest.mark.parametrize("inner_base", [AsyncBatchFlow, AsyncParallelBatchFlow, BatchFlow])
async def test_nested_async_batch_flows_merge_params(
    outer_base: type[Any], inner_base: type[Any]
) -> None:
    leaf: Node = Collect() if inner_base is BatchFlow else AsyncCollect()
    inner = batch_flow(inner_base, [{"y": 1}, {"y": 2}], leaf)
    middle = Flow(start=inner) if inner_base is BatchFlow else AsyncFlow(start=inner)
    outer = batch_flow(outer_base, [{"x": 1}, {"x": 2}], middle)
    outer.set_params({"z": 0})
    shared: dict[str, Any] = {}
    await outer.run_async(shared)
    expected = [{"z": 0, "x": x, "y": y} for x in (1, 2) for y in (1, 2)]
    key = lambda p: (p["x"], p["y"])  # noqa: E731
    assert sorted(shared["seen"], key=key) == expected
    if outer_base is AsyncBatchFlow and inner_base is not AsyncParallelBatchFlow:
        assert shared["seen"] == expected


def test_batch_flow_exception_propagates() -> None:
    class Fails(Node):
        def exec(self, prep_res: Any) -> Any:
            if self.params["i"] == 2:
                raise RuntimeError("walk 2")

    flow = batch_flow(BatchFlow, [{"i": 1}, {"i": 2}, {"i": 3}], Fails())
    with pytest.raises(RuntimeError, match="walk 2"):
        flow.run({})
    assert flow.post_calls == []


async def test_parallel_batch_flow_exception_propagates() -> None:
    class Fails(AsyncNode):
        async def exec_async(self, prep_res: Any) -> Any:
            if self.params["i"] == 2:
                raise RuntimeError("walk 2")

    flow = batch_flow(AsyncParallelBatchFlow, [{"i": 1}, {"i": 2}], Fails())
    with pytest.raises(RuntimeError, match="walk 2"):
        await flow.run_async({})
