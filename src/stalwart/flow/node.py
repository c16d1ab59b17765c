"""Nodes: the units of work a flow walks, PocketFlow-compatible.

A node's life is `prep` (read the shared store) → `exec` (the work, which may
be retried and should not touch the store) → `post` (write the store, pick
the next action). Keeping `exec` apart is what lets the durable layer journal
its result and never run a finished one again: every call goes through
`stalwart.flow._seam` for that reason.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Awaitable
from typing import Any, TypeVar

from ._seam import invoke, invoke_async

__all__ = [
    "AsyncBatchNode",
    "AsyncNode",
    "AsyncParallelBatchNode",
    "BaseNode",
    "BatchNode",
    "Node",
]

_N = TypeVar("_N", bound="BaseNode")


class _Transition:
    """The half-built edge of ``node - "action" >> other``."""

    __slots__ = ("action", "source")

    def __init__(self, source: BaseNode, action: str) -> None:
        self.source = source
        self.action = action

    def __rshift__(self, target: _N) -> _N:
        return self.source.next(target, self.action)


class BaseNode:
    """A step of a graph, with no retries; `Node` is what programs usually extend.

    Programs read and write `params` and `successors` directly, so they are
    plain attributes, not properties.
    """

    params: dict[str, Any]
    successors: dict[str, BaseNode]

    def __init__(self) -> None:
        self.params = {}
        self.successors = {}

    def __stalwart_version__(self) -> list[Any]:
        """What decides a durable run of this node's graph, for a policy's code
        version (stalwart.runner.versions): its class's code and where each
        action leads."""
        parts: list[Any] = [type(self)]
        for action in sorted(self.successors):
            parts += [action, self.successors[action]]
        return parts

    def set_params(self, params: dict[str, Any]) -> None:
        # A method, not just the attribute, because flows call it and
        # programs may override it to react to their parameters.
        self.params = params

    def next(self, node: _N, action: str = "default") -> _N:
        """Wire `node` after this one; returning it is what makes chains work."""
        if action in self.successors:
            warnings.warn(f"Overwriting successor for action '{action}'", stacklevel=2)
        self.successors[action] = node
        return node

    def prep(self, shared: Any) -> Any:
        return None

    def exec(self, prep_res: Any) -> Any:
        return None

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        return None

    def _exec(self, prep_res: Any) -> Any:
        return invoke(self, "exec", 0, self.exec, prep_res)

    def _run(self, shared: Any) -> Any:
        prep_res = invoke(self, "prep", 0, self.prep, shared)
        exec_res = self._exec(prep_res)
        return invoke(self, "post", 0, self.post, shared, prep_res, exec_res)

    def run(self, shared: Any) -> Any:
        """Run this node alone; following successors is a flow's job, hence the warning."""
        if self.successors:
            warnings.warn("Node won't run successors. Use Flow.", stacklevel=2)
        return self._run(shared)

    def __rshift__(self, other: _N) -> _N:
        return self.next(other)

    def __sub__(self, action: str) -> _Transition:
        if isinstance(action, str):
            return _Transition(self, action)
        raise TypeError("Action must be a string")


class Node(BaseNode):
    """A node whose `exec` is retried `max_retries` times, `wait` seconds apart.

    Retries happen on the same object so that `exec` can read `cur_retry`
    (for example to change its prompt on a second attempt).
    """

    max_retries: int
    wait: float
    cur_retry: int

    def __init__(self, max_retries: int = 1, wait: float = 0) -> None:
        super().__init__()
        self.max_retries = max_retries
        self.wait = wait
        self.cur_retry = 0

    def exec_fallback(self, prep_res: Any, exc: Exception) -> Any:
        """Called after the last failed attempt; what it returns becomes `exec_res`."""
        raise exc

    def _attempts(self, prep_res: Any) -> Any:
        attempt = 0
        while attempt < self.max_retries:
            self.cur_retry = attempt
            try:
                return self.exec(prep_res)
            except Exception as exc:
                attempt += 1
                if attempt >= self.max_retries:
                    return self.exec_fallback(prep_res, exc)
                if self.wait > 0:
                    time.sleep(self.wait)
        # max_retries < 1: PocketFlow makes no attempt and yields None.
        return None

    def _exec(self, prep_res: Any) -> Any:
        return invoke(self, "exec", 0, self._attempts, prep_res)


class BatchNode(Node):
    """`prep` returns a list; `exec` (with its retries) runs once per item."""

    def _exec(self, prep_res: Any) -> Any:
        attempts = self._attempts
        return [
            invoke(self, "exec", index, attempts, item) for index, item in enumerate(prep_res or ())
        ]


class AsyncNode(Node):
    """A node whose steps are coroutines; it must run under `run_async` or an `AsyncFlow`."""

    async def prep_async(self, shared: Any) -> Any:
        return None

    async def exec_async(self, prep_res: Any) -> Any:
        return None

    async def exec_fallback_async(self, prep_res: Any, exc: Exception) -> Any:
        raise exc

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        return None

    def _run(self, shared: Any) -> Any:
        # A sync caller (run(), a sync Flow) would otherwise skip the async steps.
        raise RuntimeError("Use run_async.")

    async def run_async(self, shared: Any) -> Any:
        if self.successors:
            warnings.warn("Node won't run successors. Use AsyncFlow.", stacklevel=2)
        return await self._run_async(shared)

    async def _attempts_async(self, prep_res: Any) -> Any:
        attempt = 0
        while attempt < self.max_retries:
            self.cur_retry = attempt
            try:
                return await self.exec_async(prep_res)
            except Exception as exc:
                attempt += 1
                if attempt >= self.max_retries:
                    return await self.exec_fallback_async(prep_res, exc)
                if self.wait > 0:
                    await asyncio.sleep(self.wait)
        return None

    def _exec_async(self, prep_res: Any) -> Awaitable[Any]:
        return invoke_async(self, "exec", 0, self._attempts_async, prep_res)

    async def _run_async(self, shared: Any) -> Any:
        prep_res = await invoke_async(self, "prep", 0, self.prep_async, shared)
        exec_res = await self._exec_async(prep_res)
        return await invoke_async(self, "post", 0, self.post_async, shared, prep_res, exec_res)


class AsyncBatchNode(AsyncNode, BatchNode):
    """Items one after another, for work that must not overlap (rate limits, order)."""

    async def _exec_async(self, prep_res: Any) -> Any:
        attempts = self._attempts_async
        # No `or ()` here: PocketFlow raises TypeError when prep returns None.
        return [
            await invoke_async(self, "exec", index, attempts, item)
            for index, item in enumerate(prep_res)
        ]


class AsyncParallelBatchNode(AsyncNode, BatchNode):
    """Items concurrently (each in its own task), results in item order."""

    async def _exec_async(self, prep_res: Any) -> Any:
        attempts = self._attempts_async
        return await asyncio.gather(
            *[
                invoke_async(self, "exec", index, attempts, item)
                for index, item in enumerate(prep_res)
            ]
        )
