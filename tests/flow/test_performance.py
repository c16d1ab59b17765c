"""Real concurrency and low overhead, which PocketFlow programs rely on."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from stalwart.flow import AsyncNode, AsyncParallelBatchFlow, AsyncParallelBatchNode, Flow, Node


class Sleepy(AsyncParallelBatchNode):
    async def prep_async(self, shared: Any) -> Any:
        return list(range(5))

    async def exec_async(self, item: Any) -> Any:
        await asyncio.sleep(0.1)
        return item


async def test_five_parallel_items_sleeping_point_one_finish_together() -> None:
    start = time.perf_counter()
    await Sleepy().run_async({})
    elapsed = time.perf_counter() - start
    # The guarantee is "well under 0.2 s"; the bound leaves room for a loaded machine.
    assert 0.1 <= elapsed < 0.35


async def test_five_parallel_walks_sleeping_point_one_finish_together() -> None:
    class Nap(AsyncNode):
        async def exec_async(self, prep_res: Any) -> Any:
            await asyncio.sleep(0.1)

    class Fan(AsyncParallelBatchFlow):
        async def prep_async(self, shared: Any) -> Any:
            return [{"i": i} for i in range(5)]

    start = time.perf_counter()
    await Fan(start=Nap()).run_async({})
    elapsed = time.perf_counter() - start
    assert 0.1 <= elapsed < 0.35


def test_per_node_overhead_is_a_few_microseconds() -> None:
    # A smoke check, not a benchmark: PocketFlow takes 2 to 4 µs a node here,
    # and we allow ten times that so a loaded machine never fails it.
    nodes = [Node() for _ in range(2000)]
    for a, b in itertools.pairwise(nodes):
        a >> b
    flow = Flow(start=nodes[0])
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        flow.run({})
        best = min(best, time.perf_counter() - start)
    assert best / len(nodes) < 40e-6
