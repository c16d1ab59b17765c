"""The shared store: one object passed everywhere, holding anything."""

from __future__ import annotations

import asyncio
from typing import Any

from stalwart.flow import AsyncFlow, AsyncNode, BatchFlow, Flow, Node


def test_same_shared_object_reaches_every_step_at_every_level() -> None:
    class Store:
        """Not a dict: programs may pass any object."""

        def __init__(self) -> None:
            self.seen: list[tuple[str, int]] = []

    class Spy(Node):
        def prep(self, shared: Any) -> Any:
            shared.seen.append(("prep", id(shared)))

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared.seen.append(("post", id(shared)))

    class Batch(BatchFlow):
        def prep(self, shared: Any) -> Any:
            shared.seen.append(("batch prep", id(shared)))
            return [{}, {}]

    store = Store()
    Flow(start=Flow(start=Batch(start=Spy()))).run(store)
    assert {i for _, i in store.seen} == {id(store)}
    assert [k for k, _ in store.seen] == ["batch prep", "prep", "post", "prep", "post"]


async def test_two_concurrent_flows_talk_through_queues_in_the_store() -> None:
    class Producer(AsyncNode):
        async def prep_async(self, shared: Any) -> Any:
            return shared["to_consumer"]

        async def exec_async(self, queue: Any) -> Any:
            for i in range(5):
                await queue.put(i)
                await asyncio.sleep(0)
            await queue.put(None)

    class Consumer(AsyncNode):
        async def prep_async(self, shared: Any) -> Any:
            return shared["to_consumer"], shared["replies"]

        async def exec_async(self, queues: Any) -> Any:
            inbox, replies = queues
            got = []
            while (item := await inbox.get()) is not None:
                got.append(item)
                await replies.put(item * 10)
            return got

        async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["consumed"] = exec_res

    class Listener(AsyncNode):
        async def exec_async(self, prep_res: Any) -> Any:
            return None

        async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            replies = shared["replies"]
            shared["replies_seen"] = [await replies.get() for _ in range(5)]

    shared: dict[str, Any] = {"to_consumer": asyncio.Queue(), "replies": asyncio.Queue()}
    consumer = Consumer()
    consumer >> Listener()
    await asyncio.wait_for(
        asyncio.gather(
            AsyncFlow(start=Producer()).run_async(shared),
            AsyncFlow(start=consumer).run_async(shared),
        ),
        timeout=5,
    )
    assert shared["consumed"] == [0, 1, 2, 3, 4]
    assert shared["replies_seen"] == [0, 10, 20, 30, 40]
