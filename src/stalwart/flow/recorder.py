"""The recorder of one flow run inside a run: the `FlowHook` that records it.

Both hooks, sync and async, are thin: what a phase answers from the ledger
and what it records is decided once, in `.visits`. What differs is only how
user code is called and how a record is written: awaited on the loop, or,
from a sync flow's worker thread, handed to the loop and waited for
(``Visits.submit``). A node's ``exec`` is a unit of work of the engine's
journaling API: ``Engine.run_unit``, or ``Engine.replayed_unit`` on a
thread, which cannot await.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from ..core import codec
from ..core.context import Context
from ..core.policy import use_context
from ._seam import Phase, current_hook
from .node import BaseNode
from .visits import LIVE, POST, PREP, Stopped, Visit, Visits, walk_scope

__all__ = ["FlowRecorder"]

_T = TypeVar("_T")
_AsyncFn = Callable[..., Awaitable[Any]]


class _Outcome:
    """What a sync exec returned or raised, and when it began, handed to its
    unit to record."""

    __slots__ = ("error", "started", "value")

    def __init__(self, value: Any, error: Exception | None, started: float) -> None:
        self.value = value
        self.error = error
        self.started = started

    async def replay(self, ctx: Context) -> Any:
        """The unit's work: give back what the exec did on its thread."""
        if self.error is not None:
            raise self.error
        return self.value


async def _unhooked(fn: _AsyncFn, args: tuple[Any, ...], ctx: Context) -> Any:
    """An async exec as a unit's work: flows it runs are its own, not ours."""
    token = current_hook.set(None)
    try:
        return await fn(*args)
    finally:
        current_hook.reset(token)


class FlowRecorder(Visits):
    """The `FlowHook` of one flow run inside a run: events, and records when durable."""

    # -- FlowHook: async -------------------------------------------------------
    def call_async(
        self,
        node: BaseNode,
        phase: Phase,
        index: int,
        fn: Callable[..., Awaitable[_T]],
        args: tuple[Any, ...],
    ) -> Awaitable[_T]:
        if phase == "exec":
            return self._exec_async(node, index, fn, args)
        if phase == "prep":
            return self._prep_async(node, fn, args)
        if phase == "post":
            return self._post_async(node, fn, args)
        return self._walk_async(node, index, fn, args)

    async def _user_async(self, visit: Visit, ctx: Context | None, fn: _AsyncFn, args: Any) -> Any:
        """User code (prep, post, an in-memory exec), live: the store restored
        first, no hook of ours inside it, child steps under ``ctx``."""
        self.go_live()
        hook_token = current_hook.set(None)
        try:
            if ctx is None:
                return await fn(*args)
            with use_context(ctx):
                return await fn(*args)
        except Exception as exc:
            self.fail(visit, exc)
            raise
        finally:
            current_hook.reset(hook_token)

    async def _prep_async(self, node: BaseNode, fn: _AsyncFn, args: Any) -> Any:
        if self.pending:
            await self.flush()
        visit, answer = self.open_visit(node)
        if answer is not LIVE:
            return answer
        result = await self._user_async(visit, self.user_context(visit, "prep"), fn, args)
        record = self.prepared(visit, result)
        if record is not None:
            await self.write(f"{visit.key}.prep", PREP, record)
        return result

    async def _exec_async(self, node: BaseNode, index: int, fn: _AsyncFn, args: Any) -> Any:
        if self.pending:
            await self.flush()
        visit = self.visit_of(node)
        if visit.done is not None:
            return None
        if not self.durable:
            return await self._user_async(visit, None, fn, args)
        key, identity = self.exec_key(visit, index)
        try:
            work = partial(_unhooked, fn, args)
            return await self.x.run_unit(key, f"{visit.name}.exec", work, identity)
        except Exception as exc:
            self.fail(visit, exc)
            raise

    async def _post_async(self, node: BaseNode, fn: _AsyncFn, args: Any) -> Any:
        if self.pending:
            await self.flush()
        visit = self.visit_of(node)
        if visit.done is not None:
            return self.close(visit, codec.decode(visit.done["action"]))
        action = await self._user_async(visit, self.user_context(visit, "post"), fn, args)
        record = self.posted(visit, action)
        if record is not None:
            await self.write(f"{visit.key}.post", POST, record)
        return self.close(visit, action)

    async def _walk_async(self, node: BaseNode, index: int, fn: _AsyncFn, args: Any) -> Any:
        if self.pending:
            await self.flush()
        visit = self.visit_of(node)
        if visit.done is not None:
            return None
        token = walk_scope.set(self.scope_of(visit, index))
        try:
            result = await fn(*args)
        except Exception as exc:
            self.fail(visit, exc)
            raise
        finally:
            walk_scope.reset(token)
        if self.pending:
            await self.flush()
        return result

    # -- FlowHook: sync ----------------------------------------------------------
    def call(
        self,
        node: BaseNode,
        phase: Phase,
        index: int,
        fn: Callable[..., _T],
        args: tuple[Any, ...],
    ) -> _T:
        if self.stopped:
            raise Stopped
        result: Any
        if phase == "prep":
            result = self._prep_sync(node, fn, args)
        elif phase == "exec":
            result = self._exec_sync(node, index, fn, args)
        elif phase == "post":
            result = self._post_sync(node, fn, args)
        else:
            result = self._walk_sync(node, index, fn, args)
        return result  # type: ignore[no-any-return]

    def _user_sync(
        self, visit: Visit, ctx: Context | None, fn: Callable[..., Any], args: Any
    ) -> Any:
        """`_user_async` for sync code."""
        self.go_live()
        try:
            return _call_sync(ctx, fn, args)
        except Exception as exc:
            self.fail(visit, exc)
            raise

    def _prep_sync(self, node: BaseNode, fn: Callable[..., Any], args: Any) -> Any:
        visit, answer = self.open_visit(node)
        if answer is not LIVE:
            return answer
        result = self._user_sync(visit, self.user_context(visit, "prep"), fn, args)
        record = self.prepared(visit, result)
        if record is not None:
            self.submit(self.write(f"{visit.key}.prep", PREP, record))
        return result

    def _exec_sync(self, node: BaseNode, index: int, fn: Callable[..., Any], args: Any) -> Any:
        visit = self.visit_of(node)
        if visit.done is not None:
            return None
        if not self.durable:
            return self._user_sync(visit, None, fn, args)
        key, identity = self.exec_key(visit, index)
        name = f"{visit.name}.exec"
        try:
            found, value = self.x.replayed_unit(key, name, identity)
            if found:
                return value
            started = time.time()  # the step's start is the exec's, not its record's
            try:
                outcome = _Outcome(_call_sync(self.x.context(key), fn, args), None, started)
            except Exception as exc:  # recorded below, then raised (S4)
                outcome = _Outcome(None, exc, started)
            on_loop = threading.get_ident() == self.loop_thread
            recorded = self.submit(self._record(key, name, identity, outcome, on_loop))
            if not on_loop:
                return recorded  # the value that won the record (S3)
            if outcome.error is not None:
                raise outcome.error
            return outcome.value
        except Exception as exc:
            self.fail(visit, exc)
            raise

    async def _record(
        self, key: str, name: str, identity: dict[str, Any], outcome: _Outcome, queued: bool
    ) -> Any:
        """Record a sync exec's outcome as its unit (the winner's, S3)."""
        try:
            return await self.x.run_unit(key, name, outcome.replay, identity, outcome.started)
        except Exception as exc:
            if queued and exc is outcome.error:
                return None  # the sync caller has raised it already
            raise

    def _post_sync(self, node: BaseNode, fn: Callable[..., Any], args: Any) -> Any:
        visit = self.visit_of(node)
        if visit.done is not None:
            return self.close(visit, codec.decode(visit.done["action"]))
        action = self._user_sync(visit, self.user_context(visit, "post"), fn, args)
        record = self.posted(visit, action)
        if record is not None:
            self.submit(self.write(f"{visit.key}.post", POST, record))
        return self.close(visit, action)

    def _walk_sync(self, node: BaseNode, index: int, fn: Callable[..., Any], args: Any) -> Any:
        visit = self.visit_of(node)
        if visit.done is not None:
            return None
        token = walk_scope.set(self.scope_of(visit, index))
        try:
            return fn(*args)
        except Exception as exc:
            self.fail(visit, exc)
            raise
        finally:
            walk_scope.reset(token)


def _call_sync(ctx: Context | None, fn: Callable[..., Any], args: Any) -> Any:
    """Call sync user code with no hook of ours inside it, as step ``ctx``."""
    hook_token = current_hook.set(None)
    try:
        if ctx is None:
            return fn(*args)
        with use_context(ctx):
            return fn(*args)
    finally:
        current_hook.reset(hook_token)
