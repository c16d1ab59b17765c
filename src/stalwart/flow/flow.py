"""Flows: walking a graph of nodes, PocketFlow-compatible.

A flow is itself a node (it has `prep` and `post`, successors, params), so
flows nest and an outer flow can branch on the action an inner flow ends
with. Its "exec" is the walk: from `start_node`, run a fresh shallow copy of
each node with the walk's params, and follow the edge named by the action
that node's `post` returned.
"""

from __future__ import annotations

import asyncio
import copy
import copyreg
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from ..core.policy import Policy, current_context
from ._seam import invoke, invoke_async, run_entry, top_level
from .node import AsyncNode, BaseNode

__all__ = [
    "AsyncBatchFlow",
    "AsyncFlow",
    "AsyncParallelBatchFlow",
    "BatchFlow",
    "Flow",
]

_N = TypeVar("_N", bound=BaseNode)

# Classes whose shallow copy is just "same class, same __dict__". For them we
# skip copy.copy's reduce protocol (about 1 µs a node) and get an identical
# result. Classes that customise copying in any way go through copy.copy.
# Keyed by class, decided once per class (node classes live for the program).
_PLAIN_COPY: dict[type, bool] = {}
_new_object = object.__new__
_OBJECT_DEFAULTS = {
    name: getattr(object, name)
    for name in ("__reduce_ex__", "__reduce__", "__getstate__", "__new__")
}


def _copies_plainly(cls: type) -> bool:
    return (
        all(getattr(cls, name) is default for name, default in _OBJECT_DEFAULTS.items())
        and getattr(cls, "__copy__", None) is None
        and getattr(cls, "__setstate__", None) is None
        and not any("__slots__" in vars(k) for k in cls.__mro__)
        and cls not in copyreg.dispatch_table
    )


def _fresh(node: _N) -> _N:
    """`copy.copy(node)`, faster for ordinary classes.

    A copy per visit is what keeps concurrent branches (and repeated visits)
    from overwriting each other's params and attributes, while attributes set
    on the instance, even replaced methods, carry over.
    """
    cls = type(node)
    plain = _PLAIN_COPY.get(cls)
    if plain is None:
        plain = _PLAIN_COPY[cls] = _copies_plainly(cls)
    if plain:
        clone: _N = _new_object(cls)
        clone.__dict__.update(node.__dict__)
        return clone
    return copy.copy(node)


class Flow(BaseNode):
    """Runs a graph synchronously; `run()` returns the last node's action."""

    start_node: BaseNode | None

    def __init__(self, start: BaseNode | None = None) -> None:
        super().__init__()
        self.start_node = start

    def start(self, start: _N) -> _N:
        self.start_node = start
        return start

    def __stalwart_version__(self) -> list[Any]:
        """Its own class and actions, and the graph from its start node."""
        return [*super().__stalwart_version__(), "start", self.start_node]

    @property
    def __stalwart_policy__(self) -> Policy[..., Any]:
        """The flow as a policy: ``await runner.run(flow, shared={...})`` returns the store.

        See `stalwart.flow.durable` for what a durable runner records.
        """
        return run_entry().policy_of(self)

    def __stalwart_in_place__(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Callable[[Any], Any]:
        """``runner.run(flow, shared=store, in_place=True)``: how the run's
        result, the store as the flow left it, is written into ``store``.

        Called before the run starts, so that a call with no store to update
        fails at once. What the returned function gives back is what
        ``runner.run`` returns: ``store`` itself.
        """
        store = kwargs["shared"] if "shared" in kwargs else (args[0] if args else None)
        if not isinstance(store, dict) and not isinstance(getattr(store, "__dict__", None), dict):
            raise TypeError(
                "in_place=True writes the flow's results into the shared store it is given: "
                f"pass shared=a dict, not {type(store).__name__}"
            )
        return lambda result: _fill(store, result)

    def run(self, shared: Any) -> Any:
        """Walk the graph on ``shared``; return the last action (as `BaseNode.run`)."""
        if self.successors:
            warnings.warn("Node won't run successors. Use Flow.", stacklevel=2)
        top = top_level()
        if top is not None and not isinstance(self, AsyncNode) and current_context() is None:
            # Under `stalwart run`: a flow a program runs outside any run is a durable run.
            return top.run(self, shared)
        return self._run(shared)

    def get_next_node(self, curr: BaseNode, action: Any) -> BaseNode | None:
        """Follow `action` (None meaning "default") from `curr`.

        A node that has edges but none for this action is most likely a
        wiring mistake, so say so; a node with no edges is a normal end.
        """
        nxt = curr.successors.get(action or "default")
        # Truthiness, not `is None`, as in PocketFlow: a falsy node ends the walk.
        if not nxt and curr.successors:
            warnings.warn(
                f"Flow ends: '{action}' not found in {list(curr.successors)}", stacklevel=2
            )
        return nxt

    def _walk(self, shared: Any, params: dict[str, Any] | None = None) -> Any:
        # One params dict for the whole walk: nodes of a run share it, the
        # flow's own params stay untouched, parallel walks get their own.
        walk_params = {**self.params} if params is None else params
        action: Any = None
        node = self.start_node
        while node:
            node = _fresh(node)
            node.set_params(walk_params)
            action = node._run(shared)
            node = self.get_next_node(node, action)
        return action

    def _run(self, shared: Any) -> Any:
        prep_res = invoke(self, "prep", 0, self.prep, shared)
        exec_res = invoke(self, "walk", 0, self._walk, shared, None)
        return invoke(self, "post", 0, self.post, shared, prep_res, exec_res)

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        # exec_res is the walk's last action: returning it lets an outer
        # flow branch on how this one ended.
        return exec_res


def _fill(store: Any, result: Any) -> Any:
    """Make ``store`` hold what ``result`` holds (the recorded store of a
    durable run is a copy of the caller's); ``store`` itself."""
    if result is store:
        return store  # in memory the flow worked on the caller's store itself
    target = store if isinstance(store, dict) else store.__dict__
    source = result if isinstance(result, dict) else getattr(result, "__dict__", None)
    if not isinstance(source, dict):
        raise TypeError(
            f"the flow's run returned a {type(result).__name__}, not a shared store to copy "
            "into the caller's"
        )
    target.clear()
    target.update(source)
    return store


class BatchFlow(Flow):
    """Walks the whole graph once per param dict that `prep` returns, in order."""

    def _run(self, shared: Any) -> Any:
        batches = invoke(self, "prep", 0, self.prep, shared) or []
        walk = self._walk
        for index, item in enumerate(batches):
            invoke(self, "walk", index, walk, shared, {**self.params, **item})
        return invoke(self, "post", 0, self.post, shared, batches, None)


class AsyncFlow(Flow, AsyncNode):
    """Runs a graph that may mix async and sync nodes and flows."""

    def _run(self, shared: Any) -> Any:
        # Running it synchronously would skip prep_async/post_async and fail
        # at the first async node; fail at once instead.
        raise RuntimeError("Use run_async.")

    async def run_async(self, shared: Any) -> Any:
        if self.successors:
            warnings.warn("Node won't run successors. Use AsyncFlow.", stacklevel=2)
        ctx = current_context()
        if ctx is None:
            top = top_level()
            if top is not None:  # under `stalwart run`: a durable run of its own
                return await top.run_async(self, shared)
            return await self._run_async(shared)
        # Inside a run (a policy, a node's exec): journaled as part of that run.
        return await run_entry().run_inside(ctx, self, shared)

    async def _walk_async(self, shared: Any, params: dict[str, Any] | None = None) -> Any:
        walk_params = {**self.params} if params is None else params
        action: Any = None
        node = self.start_node
        while node:
            node = _fresh(node)
            node.set_params(walk_params)
            if isinstance(node, AsyncNode):
                action = await node._run_async(shared)
            else:
                action = node._run(shared)
            node = self.get_next_node(node, action)
        return action

    async def _run_async(self, shared: Any) -> Any:
        prep_res = await invoke_async(self, "prep", 0, self.prep_async, shared)
        exec_res = await invoke_async(self, "walk", 0, self._walk_async, shared, None)
        return await invoke_async(self, "post", 0, self.post_async, shared, prep_res, exec_res)

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        return exec_res


class AsyncBatchFlow(AsyncFlow, BatchFlow):
    """Walks once per param dict, one walk after another."""

    async def _run_async(self, shared: Any) -> Any:
        batches = await invoke_async(self, "prep", 0, self.prep_async, shared) or []
        walk = self._walk_async
        for index, item in enumerate(batches):
            await invoke_async(self, "walk", index, walk, shared, {**self.params, **item})
        return await invoke_async(self, "post", 0, self.post_async, shared, batches, None)


class AsyncParallelBatchFlow(AsyncFlow, BatchFlow):
    """Walks once per param dict, all walks concurrently."""

    async def _run_async(self, shared: Any) -> Any:
        batches = await invoke_async(self, "prep", 0, self.prep_async, shared) or []
        walk = self._walk_async
        params = self.params
        await asyncio.gather(
            *[
                invoke_async(self, "walk", index, walk, shared, {**params, **item})
                for index, item in enumerate(batches)
            ]
        )
        return await invoke_async(self, "post", 0, self.post_async, shared, batches, None)
