"""AsyncFlow: async and sync nodes and flows, mixed and nested."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from stalwart.flow import AsyncFlow, AsyncNode, Flow, Node

from ._helpers import Caught


class SyncStep(Node):
    def __init__(self, name: str, action: Any = None) -> None:
        super().__init__()
        self.name = name
        self.action = action

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared.setdefault("log", []).append(self.name)
        return self.action


class AsyncStep(AsyncNode):
    def __init__(self, name: str, action: Any = None) -> None:
        super().__init__()
        self.name = name
        self.action = action

    async def exec_async(self, prep_res: Any) -> Any:
        await asyncio.sleep(0)

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared.setdefault("log", []).append(self.name)
        return self.action


async def test_async_flow_mixes_sync_and_async_nodes(caught: Caught) -> None:
    a, b, c = AsyncStep("a"), SyncStep("b", "go"), AsyncStep("c", "end")
    a >> b
    b - "go" >> c
    shared: dict[str, Any] = {}
    assert await AsyncFlow(start=a).run_async(shared) == "end"
    assert shared["log"] == ["a", "b", "c"]
    assert caught.messages == []


async def test_async_flow_of_only_sync_nodes() -> None:
    a, b = SyncStep("a"), SyncStep("b", "last")
    a >> b
    shared: dict[str, Any] = {}
    assert await AsyncFlow(start=a).run_async(shared) == "last"
    assert shared["log"] == ["a", "b"]


async def test_async_flow_runs_sync_flow_inside() -> None:
    inner = Flow(start=SyncStep("inner", "ok"))
    inner - "ok" >> AsyncStep("after")
    shared: dict[str, Any] = {}
    await AsyncFlow(start=inner).run_async(shared)
    assert shared["log"] == ["inner", "after"]


async def test_sync_flow_inside_async_flow_still_rejects_async_nodes() -> None:
    inner = Flow(start=AsyncStep("x"))
    with pytest.raises(RuntimeError, match=r"^Use run_async\.$"):
        await AsyncFlow(start=inner).run_async({})


async def test_async_flow_inside_async_flow_branches_on_its_result() -> None:
    inner = AsyncFlow(start=AsyncStep("inner", "left"))
    inner - "left" >> SyncStep("L")
    inner - "right" >> SyncStep("R")
    shared: dict[str, Any] = {}
    assert await AsyncFlow(start=inner).run_async(shared) is None
    assert shared["log"] == ["inner", "L"]


async def test_async_flow_prep_and_post_run_and_post_default_returns_last_action() -> None:
    calls: list[Any] = []

    class MyFlow(AsyncFlow):
        async def prep_async(self, shared: Any) -> Any:
            calls.append("prep")
            return "p"

        async def exec_async(self, prep_res: Any) -> Any:
            calls.append("exec")

        async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            calls.append(("post", prep_res, exec_res))
            return await super().post_async(shared, prep_res, exec_res)

    assert await MyFlow(start=AsyncStep("a", "act")).run_async({}) == "act"
    assert calls == ["prep", ("post", "p", "act")]


async def test_async_flow_warns_once_when_action_missing(caught: Caught) -> None:
    a = AsyncStep("a", "missing")
    a - "present" >> AsyncStep("b")
    shared: dict[str, Any] = {}
    assert await AsyncFlow(start=a).run_async(shared) == "missing"
    assert shared["log"] == ["a"]
    assert caught.messages == ["Flow ends: 'missing' not found in ['present']"]


async def test_async_flow_copies_nodes_and_sets_params() -> None:
    seen: list[Any] = []

    class Spy(AsyncNode):
        async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            seen.append((id(self), self.params))

    original = Spy()
    original.set_params({"own": 1})
    flow = AsyncFlow(start=original)
    flow.set_params({"flow": 2})
    await flow.run_async({})
    assert seen[0][0] != id(original)
    assert seen[0][1] == {"flow": 2}
    assert original.params == {"own": 1}
    assert flow.params == {"flow": 2}


async def test_exceptions_propagate_out_of_async_flow() -> None:
    class Boom(AsyncNode):
        async def exec_async(self, prep_res: Any) -> Any:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await AsyncFlow(start=Boom()).run_async({})
