"""The visits of one flow run inside a run, and their records.

Every node (or sub-flow) a walk runs is a *visit*, keyed in walk order under
the walk's scope (S1). :class:`Visits` decides, once for the sync and the
async hook of `.recorder`, what a visit's phases answer from the journal and
what they record: it finds a visit's records (a mismatch is nondeterminism,
S5), builds the records of a finished ``prep`` and ``post``, emits the node
events, and carries writes from a sync flow's thread to the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

from ..core import codec
from ..core.context import Context, Journaling
from ..core.errors import NonDeterminismError
from .events import NodeFailed, NodeFinished, NodeStarted, flow_name, node_name
from .flow import BatchFlow, Flow
from .node import BaseNode, BatchNode
from .shared import SharedState, journal_entry

__all__ = ["LIVE", "POST", "PREP", "Stopped", "Visit", "Visits", "walk_scope"]

_T = TypeVar("_T")

# The kinds of the flow's own records (``Engine.recorded``), named
# ``stalwart.flow.post`` and ``stalwart.flow.prep`` in the ledger.
POST = "flow.post"
PREP = "flow.prep"
LIVE: Any = object()  # "no recorded answer: run the user's code"

# The walk scope new visits are numbered in; a task per parallel walk keeps
# parallel walks apart.
walk_scope: ContextVar[Context | None] = ContextVar("stalwart_flow_scope", default=None)


class Stopped(BaseException):
    """Unwinds a sync flow's thread after its run was cancelled or released."""


class Visit:
    """One run of one node (or sub-flow) copy in a walk."""

    __slots__ = ("count", "done", "failed", "key", "name", "node")

    def __init__(self, node: BaseNode, key: str) -> None:
        self.node = node
        self.key = key
        self.name = flow_name(node) if isinstance(node, Flow) else node_name(node)
        self.done: dict[str, Any] | None = None  # its post record, if it finished before
        self.count: int | None = None  # a batch node's number of items
        self.failed = False


class Visits:
    """What both halves of a flow's hook share: the visits of one flow run,
    their records, their events, and writes from sync code."""

    def __init__(self, engine: Journaling, root: Context, shared: Any, name: str) -> None:
        self.x = engine
        self.durable = engine.durable
        self.root = root
        self.name = name
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.visits: dict[int, Visit] = {}
        self.pending: list[Coroutine[Any, Any, Any]] = []
        self.stopped = False
        self.posts: dict[str, Any] = {}
        self.preps: dict[str, Any] = {}
        self.state: SharedState | None = None
        if self.durable:
            self.posts = engine.replayed_values(POST)
            self.preps = engine.replayed_values(PREP)
            mine = [
                entry
                for values in (self.posts, self.preps)
                for key, value in values.items()
                if (entry := journal_entry(engine, key, value))["flow"] == root.key
            ]
            self.state = SharedState(shared, name, root.key, mine)

    def go_live(self) -> None:
        """Before the first live call: put the store back as the journal has it."""
        if self.state is not None:
            self.state.go_live()

    # -- visits (shared by both hooks) --------------------------------------------
    def open_visit(self, node: BaseNode) -> tuple[Visit, Any]:
        """Start a visit; return it and a recorded answer for its prep, or LIVE."""
        scope = walk_scope.get() or self.root
        visit = Visit(node, scope.next_key())
        self.visits[id(node)] = visit
        answer = LIVE
        if self.durable:
            done = self._recorded(self.posts, f"{visit.key}.post", visit, "post")
            if done is not None:
                visit.done = done
                # Nothing of a finished visit runs: exec and post are answered too.
                answer = [] if isinstance(node, BatchNode) else None
            elif isinstance(node, Flow):
                prep = self._recorded(self.preps, f"{visit.key}.prep", visit, "prep")
                if prep is not None:
                    answer = codec.decode(prep["result"])
        self._emit(visit.key, NodeStarted(visit.name, visit.key, visit.done is not None))
        return visit, answer

    def _recorded(
        self, values: dict[str, Any], key: str, visit: Visit, kind: str
    ) -> dict[str, Any] | None:
        """This visit's record at ``key``; nondeterminism (S5) if another is there."""
        if key not in values:
            rec = self.x.replay.get(key)
            if rec is None:
                return None
            raise self.x.halt(_mismatch(self.x, key, rec.name, f"{kind} of flow node {visit.name}"))
        value = journal_entry(self.x, key, values[key])
        if value["node"] != visit.name:
            raise self.x.halt(
                _mismatch(self.x, key, f"flow node {value['node']}", f"flow node {visit.name}")
            )
        return value

    def visit_of(self, node: BaseNode) -> Visit:
        """The open visit of ``node``, opened now if its ``_run`` skipped prep."""
        visit = self.visits.get(id(node))
        if visit is None:  # a node whose _run skips prep: number it now
            visit = self.open_visit(node)[0]
        return visit

    def prepared(self, visit: Visit, result: Any) -> dict[str, Any] | None:
        """After a live prep: the batch size, and the record a flow's prep needs
        (a batch flow's prep decides its walks)."""
        if isinstance(visit.node, BatchNode):
            with contextlib.suppress(TypeError):
                visit.count = len(result)
        if self.state is None or not isinstance(visit.node, Flow):
            return None
        try:
            record = self.state.change(f"after prep of {visit.name}")
            record["node"] = visit.name
            where = f"flow {self.name}: the result of {visit.name}.prep"
            record["result"] = codec.encode(result, where)
        except Exception as exc:
            self.fail(visit, exc)
            raise
        return record

    def posted(self, visit: Visit, action: Any) -> dict[str, Any] | None:
        """After a live post: the record of the finished node (action, store change)."""
        if self.state is None:
            return None
        try:
            record = self.state.change(f"after node {visit.name}")
            record["node"] = visit.name
            where = f"flow {self.name}: the action {visit.name}.post returned"
            record["action"] = codec.encode(action, where)
        except Exception as exc:
            self.fail(visit, exc)
            raise
        return record

    def exec_key(self, visit: Visit, index: int) -> tuple[str, dict[str, Any]]:
        """The key of an exec unit and its identity: a batch item by its index,
        so parallel items keep their keys whatever order they finish in."""
        if isinstance(visit.node, BatchNode):
            return f"{visit.key}.exec#{index}", {"item": index, "of": visit.count}
        return f"{visit.key}.exec", {}

    def scope_of(self, visit: Visit, index: int) -> Context:
        """The scope a flow's walk numbers its visits in (``V.walk``, or
        ``V.walk#i`` for the i-th walk of a batch flow)."""
        if isinstance(visit.node, BatchFlow):
            return self.x.context(f"{visit.key}.walk#{index}")
        return self.x.context(f"{visit.key}.walk")

    def user_context(self, visit: Visit, part: str) -> Context | None:
        """The context user code of ``part`` runs as: a recorded run's child steps
        hang under the phase's key; in memory the caller's context stays."""
        return self.x.context(f"{visit.key}.{part}") if self.durable else None

    def close(self, visit: Visit, action: Any) -> Any:
        """End a visit whose post returned ``action``, and say so."""
        self.visits.pop(id(visit.node), None)
        replayed = visit.done is not None
        self._emit(visit.key, NodeFinished(visit.name, visit.key, action, replayed))
        return action

    def fail(self, visit: Visit, exc: Exception) -> None:
        """End a visit that raised, and say so once (the error goes on up)."""
        self.visits.pop(id(visit.node), None)
        if not visit.failed:
            visit.failed = True
            self._emit(visit.key, NodeFailed(visit.name, visit.key, type(exc).__name__, str(exc)))

    def _emit(self, key: str, event: Any) -> None:
        # Nothing unless someone listens; safe from a thread. Node events say
        # whether they are replayed, so they are delivered during replay too.
        self.x.emit(key, event, marked=True)

    def write(self, key: str, kind: str, record: dict[str, Any]) -> Coroutine[Any, Any, Any]:
        """Record a flow journal entry at ``key`` (the engine's ``recorded``)."""
        return self.x.recorded(key, kind, lambda: record)

    # -- writes from sync code ---------------------------------------------------
    async def flush(self) -> None:
        """Write what sync nodes on the loop's thread queued, in order."""
        while self.pending:
            await self.pending.pop(0)

    def discard(self) -> None:
        """Drop queued writes of a flow that stopped: nothing after a stop."""
        pending, self.pending = self.pending, []
        for coro in pending:
            coro.close()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> _T | None:
        """Write from sync code: wait for it off the loop, queue it on the loop."""
        if threading.get_ident() == self.loop_thread:
            self.pending.append(coro)
            return None
        if self.stopped:
            coro.close()
            raise Stopped
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        while True:
            try:
                return future.result(timeout=0.25)
            except TimeoutError:
                if future.done():
                    raise  # the write itself raised TimeoutError
                if self.stopped:
                    future.cancel()
                    raise Stopped from None


def _mismatch(engine: Journaling, key: str, recorded: str, now: str) -> NonDeterminismError:
    return NonDeterminismError(
        f"step {key} of run {engine.run_id} does not match its record:\n"
        f"  recorded: {recorded}\n"
        f"  now:      {now}\n"
        "The flow's graph or code changed, or it is not deterministic; "
        "guard changed code with `await ctx.patched(...)`."
    )
