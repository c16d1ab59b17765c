"""Durable flows: a flow run inside a Stalwart run, journaled node by node.

A flow is a policy. ``await runner.run(flow, shared={...})`` (or ``start``,
``stream``, ``ctx.call(flow, shared=...)``) runs it and **returns the shared
store as the flow left it**: PocketFlow programs read their results from
``shared``, not from the last action. ``shared`` defaults to a new dict. In
memory the store you pass is the very object the flow works on, so your dict
is updated in place too; under a durable runner a run's inputs are recorded
as JSON and the flow works on its own copy (it must be able to rebuild it
after a crash), so read the returned store. Inside a run, ``await
flow.run_async(shared)`` keeps its PocketFlow meaning (returns the last
action, updates ``shared`` in place) and is journaled as part of that run.

What a durable run records, for one flow run rooted at step key ``R`` (``""``
for a run's root; keys follow S1, a parent's key plus a suffix):

* **visits**. Every node or sub-flow a walk runs is a *visit* ``V =
  <scope>.<n>``, numbered in walk order; the flow itself is the first visit
  ``R.1``, and a walk of visit ``V`` is the scope ``V.walk`` (``V.walk#i``
  for the i-th walk of a batch flow).
* ``V.exec`` (``V.exec#i`` for batch item ``i``): each finished ``exec`` is a
  recorded step, named ``"<node>.exec"``: its result, or its error after the
  node's own retries and fallback (S4). Parallel items are keyed by their
  index, so they keep their keys whatever order they finish in. Policies
  awaited inside ``exec`` are child steps of it (``V.exec.1``, ...), those in
  ``prep`` and ``post`` are children of ``V.prep`` and ``V.post``.
* ``V.post``: after ``post``, the action it returned and the change of the
  shared store since the previous record (values of the keys that changed,
  keys that were removed; each key's value encoded on its own with
  `stalwart.core.codec`, so a value that cannot be recorded fails with a
  `SerializationError` naming the key). The chain of these changes is the
  snapshot of the store after every finished node.
* ``V.prep`` for flows only: the result of a flow's own ``prep`` (for a batch
  flow, the param dicts that decide the walks), and the store's change.

On resume the run executes again from the top (S2): a visit whose ``V.post``
exists is answered from the journal, its ``prep``, ``exec`` and ``post``
never running again; the first visit without one is the node that was
running. Before the first user code runs live, the shared store is restored
in place to the initial store plus every recorded change, that is, as it was
after the last finished node; then the node runs ``prep`` and ``post`` live,
with each ``exec`` (each batch item) that had finished answered from its
record. ``exec`` must not write the store (PocketFlow's rule): a write there
is lost if the node was interrupted after it.

Sync flows run on a worker thread (user code stays off the event loop); the
journal's writes go to the loop with `asyncio.run_coroutine_threadsafe` and
are waited for. Sync nodes inside an `AsyncFlow` run on the loop itself, as
in PocketFlow; their writes are queued and flushed at the flow's next await.

A flow's policy is named after its ``name`` attribute, else its class, else
(a stock class) ``"<Class>-<start node>"``; runs are resumed by that name,
so give a flow you run durably a stable ``name``. A sync ``flow.run(shared)``
called inside a run is not journaled (sync code there cannot reach the
loop); run it with ``await ctx.call(flow, shared=...)`` instead.

In memory nothing is recorded, and no hook is installed unless someone
streams the run, in which case a hook only emits the flow's events:
`NodeStarted`, `NodeFinished` (with the action taken) and `NodeFailed`, as
``ctx.emit`` values (`stalwart.Emitted` events of ``handle.events()`` and
``runner.stream()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from ..core import codec
from ..core.context import Context
from ..core.engine.execution import Execution
from ..core.errors import CorruptedRecord, NonDeterminismError, SerializationError
from ..core.ledger import StepRecord
from ..core.policy import Policy, _current
from ..core.recorded import error_from_json
from ._seam import Phase, current_hook
from .flow import BatchFlow, Flow
from .node import AsyncNode, BaseNode, BatchNode

__all__ = [
    "FlowPolicy",
    "NodeFailed",
    "NodeFinished",
    "NodeStarted",
    "flow_name",
    "flow_policy",
    "node_name",
    "run_flow",
    "run_here",
]

_T = TypeVar("_T")
_AsyncFn = Callable[..., Awaitable[Any]]


# -- events ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NodeStarted:
    """A node (or a sub-flow) of a flow began; ``key`` is its visit's step key."""

    node: str
    key: str
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class NodeFinished:
    """A node's ``post`` returned ``action``: the edge the flow follows next."""

    node: str
    key: str
    action: Any = None
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class NodeFailed:
    """A node (or a sub-flow) raised; the error goes on up the flow."""

    node: str
    key: str
    error_type: str
    error_message: str


# -- names and the flow's policy ---------------------------------------------
def node_name(node: BaseNode) -> str:
    """A node's ``name`` attribute if it has one, else its class name."""
    name = getattr(node, "name", None)
    return name if isinstance(name, str) and name else type(node).__name__


def flow_name(flow: BaseNode) -> str:
    """The name of a flow's policy (and so of its runs).

    A ``name`` attribute wins; then a subclass's name. A stock class
    (``Flow(start=decide)``) is told apart by its start node:
    ``"Flow-Decide"``, so that two such flows in one program do not share a
    name a runner resumes runs by.
    """
    name = getattr(flow, "name", None)
    if isinstance(name, str) and name:
        return name
    cls = type(flow)
    start = getattr(flow, "start_node", None)
    if cls.__module__ == Flow.__module__ and start is not None:
        return f"{cls.__name__}-{node_name(start)}"
    return cls.__name__


class FlowPolicy:
    """What a flow's `Policy` calls: run the flow, return its shared store."""

    __slots__ = ("flow",)

    def __init__(self, flow: BaseNode) -> None:
        self.flow = flow

    async def __call__(self, ctx: Context, shared: Any = None) -> Any:
        """Run the flow on a shared store and return the store as the flow left it.

        Args:
            shared: The shared store the nodes read and write; a new dict if omitted.
        """
        if shared is None:
            shared = {}
        await run_flow(ctx, self.flow, shared)
        return shared


def flow_policy(flow: BaseNode) -> Policy[..., Any]:
    """The policy of ``flow``, built once and kept on the flow."""
    name = flow_name(flow)
    cached = flow.__dict__.get("_stalwart_policy")
    if (
        isinstance(cached, Policy)
        and cached.name == name
        and isinstance(cached.fn, FlowPolicy)
        and cached.fn.flow is flow
    ):
        return cached
    cls = type(flow)
    doc = None if cls.__module__ == Flow.__module__ else inspect.getdoc(cls)
    description = doc or f"Run the flow {name} on a shared store; return the store."
    pol: Policy[..., Any] = Policy(FlowPolicy(flow), name=name, description=description)
    flow.__dict__["_stalwart_policy"] = pol
    return pol


# -- running a flow inside a run -----------------------------------------------
async def run_flow(ctx: Context, flow: BaseNode, shared: Any, root: Context | None = None) -> Any:
    """Run ``flow`` on ``shared`` as part of the run ``ctx`` belongs to.

    Returns the flow's last action. The journal's keys hang under ``root``
    (default: ``ctx``, whose own key sequence must then be free, as in a
    flow's policy). Durable runs are journaled; in-memory ones run the flow
    as is, with a hook that emits events only when someone streams the run.
    """
    x = ctx._x
    assert isinstance(x, Execution), "a context always belongs to an Execution"
    if x.store is None and not x.listeners:
        if isinstance(flow, AsyncNode):
            return await flow._run_async(shared)
        return await asyncio.to_thread(flow._run, shared)
    journal = _Journal(x, root or ctx, shared, flow_name(flow))
    hook_token = current_hook.set(journal)
    scope_token = _scope.set(journal.root)
    try:
        if isinstance(flow, AsyncNode):
            action = await flow._run_async(shared)
        else:
            # The thread gets a copy of this context: the hook and scope included.
            action = await asyncio.to_thread(flow._run, shared)
        await journal.flush()
        journal.go_live()  # everything was replayed: the store as the flow left it
        return action
    except Exception:
        # Keep what finished before the error (a caller may catch it and go on).
        with contextlib.suppress(Exception):
            await journal.flush()
        journal.stopped = True
        journal.discard()
        raise
    except BaseException:  # cancelled, or suspended: stop, write nothing more
        journal.stopped = True  # a sync flow's thread stops at its next node
        journal.discard()
        raise
    finally:
        _scope.reset(scope_token)
        current_hook.reset(hook_token)


async def run_here(ctx: Context, flow: BaseNode, shared: Any) -> Any:
    """``flow.run_async(shared)`` inside a run: a journaled part of that run."""
    return await run_flow(ctx, flow, shared, Context(ctx._x, ctx._next_key()))


# -- the journal -----------------------------------------------------------------
_POST = "flow.post"
_PREP = "flow.prep"
_POST_NAME = f"stalwart.{_POST}"
_PREP_NAME = f"stalwart.{_PREP}"
_LIVE: Any = object()  # "no recorded answer: run the user's code"
_SCALARS = frozenset({str, int, float, bool, type(None), bytes})

# The walk scope new visits are numbered in; a task per parallel walk keeps
# parallel walks apart.
_scope: ContextVar[Context | None] = ContextVar("stalwart_flow_scope", default=None)
# What the exec step must run: (fn, args), or the outcome of a sync exec.
_job: ContextVar[Any] = ContextVar("stalwart_flow_job", default=None)


class _Stopped(BaseException):
    """Unwinds a sync flow's thread after its run was cancelled or released."""


class _Outcome:
    """What a sync exec returned or raised, handed to its step to record."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any, error: Exception | None) -> None:
        self.value = value
        self.error = error


async def _exec_step(ctx: Context, item: int | None = None, of: int | None = None) -> Any:
    """A node's exec (with its retries and fallback), as a recorded step."""
    job = _job.get()
    if isinstance(job, _Outcome):
        if job.error is not None:
            raise job.error
        return job.value
    fn, args = job
    token = current_hook.set(None)  # user code: flows it runs are its own
    try:
        return await fn(*args)
    finally:
        current_hook.reset(token)


_exec_policies: dict[str, Policy[..., Any]] = {}


def _exec_policy(name: str) -> Policy[..., Any]:
    pol = _exec_policies.get(name)
    if pol is None:
        pol = Policy(_exec_step, name=f"{name}.exec", description=f"exec of flow node {name}")
        _exec_policies[name] = pol
    return pol


class _Index:
    """The flow records of a run's replay map, decoded once per execution."""

    __slots__ = ("by_flow", "values")

    def __init__(self, x: Execution) -> None:
        self.values: dict[str, dict[str, Any]] = {}
        self.by_flow: dict[str, list[dict[str, Any]]] = {}
        for key, rec in x.replay.items():
            if rec.name == _POST_NAME or rec.name == _PREP_NAME:
                value = _journal_entry(x, key, x.decode_output(rec, key))
                self.values[key] = value
                self.by_flow.setdefault(value["flow"], []).append(value)


def _journal_entry(x: Execution, key: str, value: Any) -> dict[str, Any]:
    """A flow journal record of the shape :meth:`_Walk._change` writes, or
    CorruptedRecord naming the run, the step and what is wrong."""
    problem = None
    if not isinstance(value, dict):
        problem = f"a {type(value).__name__}, not a journal entry"
    elif not isinstance(value.get("flow"), str) or not isinstance(value.get("n"), int):
        problem = "no 'flow' or 'n' field"
    elif not isinstance(value.get("set"), list) or not all(
        isinstance(pair, list) and len(pair) == 2 for pair in value["set"]
    ):
        problem = "its 'set' field is not a list of [key, value] pairs"
    elif not isinstance(value.get("del"), list):
        problem = "its 'del' field is not a list"
    if problem is not None:
        bad = CorruptedRecord(f"step {key} of run {x.run_id!r}: the flow record holds {problem}")
        raise x.halt(bad)
    entry: dict[str, Any] = value
    return entry


_indexes: weakref.WeakKeyDictionary[Execution, _Index] = weakref.WeakKeyDictionary()


def _index(x: Execution) -> _Index:
    index = _indexes.get(x)
    if index is None:
        index = _indexes[x] = _Index(x)
    return index


def _mismatch(x: Execution, key: str, recorded: str, now: str) -> NonDeterminismError:
    return NonDeterminismError(
        f"step {key} of run {x.run_id} does not match its record:\n"
        f"  recorded: {recorded}\n"
        f"  now:      {now}\n"
        "The flow's graph or code changed, or it is not deterministic; "
        "guard changed code with `await ctx.patched(...)`."
    )


def _answer(x: Execution, key: str, rec: StepRecord, name: str, kwargs: dict[str, Any]) -> Any:
    """A recorded exec, read back without the event loop (sync nodes)."""
    if rec.name != name or (rec.args is not None and codec.loads(rec.args) != kwargs):
        raise x.halt(_mismatch(x, key, f"{rec.name}({rec.args})", f"{name}({json.dumps(kwargs)})"))
    x.replayed_steps += 1
    if rec.error is not None:
        raise error_from_json(rec.error, f"error of step {key} of run {x.run_id!r}")
    return x.decode_output(rec, key)


def _items(shared: Any) -> list[tuple[Any, Any]]:
    if isinstance(shared, dict):
        return list(shared.items())
    attrs = getattr(shared, "__dict__", None)
    if isinstance(attrs, dict):
        return list(attrs.items())
    raise SerializationError(
        "a durable flow needs a dict (or an object with attributes) as its shared store, "
        f"not {type(shared).__module__}.{type(shared).__qualname__}"
    )


def _replace(shared: Any, state: dict[Any, Any]) -> None:
    target = shared if isinstance(shared, dict) else shared.__dict__
    target.clear()
    target.update(state)


def _encoded(value: Any, where: str) -> tuple[Any, str]:
    tree = codec.encode(value, where)
    try:
        return tree, json.dumps(tree, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:  # NaN or infinity
        raise SerializationError(f"{where}: {exc}") from exc


class _Visit:
    """One run of one node (or sub-flow) copy in a walk."""

    __slots__ = ("count", "done", "failed", "key", "name", "node")

    def __init__(self, node: BaseNode, key: str) -> None:
        self.node = node
        self.key = key
        self.name = flow_name(node) if isinstance(node, Flow) else node_name(node)
        self.done: dict[str, Any] | None = None  # its post record, if it finished before
        self.count: int | None = None  # a batch node's number of items
        self.failed = False


class _Journal:
    """The `FlowHook` of one flow run inside a run: events, and records when durable."""

    def __init__(self, x: Execution, root: Context, shared: Any, name: str) -> None:
        self.x = x
        self.durable = x.store is not None
        self.root = root
        self.shared = shared
        self.name = name
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.visits: dict[int, _Visit] = {}
        self.pending: list[Coroutine[Any, Any, Any]] = []
        self.stopped = False
        self.n = 0  # the number of the last store change recorded
        self.last: dict[Any, tuple[Any, str]] = {}  # the store as last recorded, per key
        self.restore: list[dict[str, Any]] | None = None
        self.values: dict[str, dict[str, Any]] = {}
        if self.durable:
            index = _index(x)
            self.values = index.values
            records = index.by_flow.get(root.key)
            if records:
                self.restore = sorted(records, key=lambda v: int(v["n"]))
                self.n = int(self.restore[-1]["n"])
            else:
                self.last = self._snapshot(_items(shared), "at the start of the flow")

    # -- the shared store ----------------------------------------------------
    def _where(self, key: Any, when: str) -> str:
        return f"flow {self.name}: shared[{key!r}] {when}"

    def _snapshot(self, items: Any, when: str) -> dict[Any, tuple[Any, str]]:
        return {k: (v, _encoded(v, self._where(k, when))[1]) for k, v in items}

    def _change(self, when: str) -> dict[str, Any]:
        """What changed in the store since the last record, as a record's fields."""
        last = self.last
        now: dict[Any, tuple[Any, str]] = {}
        changed: list[list[Any]] = []
        for k, v in _items(self.shared):
            prev = last.get(k)
            if prev is not None and prev[0] is v and type(v) in _SCALARS:
                now[k] = prev
                continue
            where = self._where(k, when)
            tree, text = _encoded(v, where)
            if prev is None or prev[1] != text:
                changed.append([codec.encode(k, f"{where} (the key)"), tree])
            now[k] = (v, text)
        removed = [codec.encode(k) for k in last if k not in now]
        self.last = now
        self.n += 1
        return {"flow": self.root.key, "n": self.n, "set": changed, "del": removed}

    def go_live(self) -> None:
        """Before the first live call: put the store back as the journal has it."""
        records = self.restore
        if records is None:
            return
        self.restore = None
        state = dict(_items(self.shared))
        for value in records:
            for k, v in value["set"]:
                state[codec.decode(k)] = codec.decode(v)
            for k in value["del"]:
                state.pop(codec.decode(k), None)
        _replace(self.shared, state)
        self.last = self._snapshot(state.items(), "when resuming")

    # -- visits --------------------------------------------------------------
    def _open(self, node: BaseNode) -> tuple[_Visit, Any]:
        """Start a visit; return it and a recorded answer for its prep, or _LIVE."""
        scope = _scope.get() or self.root
        visit = _Visit(node, scope._next_key())
        self.visits[id(node)] = visit
        answer = _LIVE
        if self.durable:
            done = self._recorded(f"{visit.key}.post", visit, _POST_NAME)
            if done is not None:
                visit.done = done
                # Nothing of a finished visit runs: exec and post are answered too.
                answer = [] if isinstance(node, BatchNode) else None
            elif isinstance(node, Flow):
                prep = self._recorded(f"{visit.key}.prep", visit, _PREP_NAME)
                if prep is not None:
                    answer = codec.decode(prep["result"])
        self._emit(visit.key, NodeStarted(visit.name, visit.key, visit.done is not None))
        return visit, answer

    def _recorded(self, key: str, visit: _Visit, kind: str) -> dict[str, Any] | None:
        value = self.values.get(key)
        if value is None:
            rec = self.x.replay.get(key)
            if rec is None:
                return None
            raise self.x.halt(_mismatch(self.x, key, rec.name, f"{kind} of flow node {visit.name}"))
        if value["node"] != visit.name:
            raise self.x.halt(
                _mismatch(self.x, key, f"flow node {value['node']}", f"flow node {visit.name}")
            )
        return value

    def _visit(self, node: BaseNode) -> _Visit:
        visit = self.visits.get(id(node))
        if visit is None:  # a node whose _run skips prep: number it now
            visit = self._open(node)[0]
        return visit

    def _counted(self, visit: _Visit, prep_res: Any) -> None:
        if isinstance(visit.node, BatchNode):
            with contextlib.suppress(TypeError):
                visit.count = len(prep_res)

    def _exec_key(self, visit: _Visit, index: int) -> tuple[str, dict[str, Any]]:
        if isinstance(visit.node, BatchNode):
            return f"{visit.key}.exec#{index}", {"item": index, "of": visit.count}
        return f"{visit.key}.exec", {}

    def _walk_scope(self, visit: _Visit, index: int) -> Context:
        if isinstance(visit.node, BatchFlow):
            return Context(self.x, f"{visit.key}.walk#{index}")
        return Context(self.x, f"{visit.key}.walk")

    def _prep_record(self, visit: _Visit, result: Any) -> dict[str, Any]:
        record = self._change(f"after prep of {visit.name}")
        record["node"] = visit.name
        record["result"] = codec.encode(
            result, f"flow {self.name}: the result of {visit.name}.prep"
        )
        return record

    def _post_record(self, visit: _Visit, action: Any) -> dict[str, Any]:
        record = self._change(f"after node {visit.name}")
        record["node"] = visit.name
        record["action"] = codec.encode(
            action, f"flow {self.name}: the action {visit.name}.post returned"
        )
        return record

    def _write(self, key: str, kind: str, value: dict[str, Any]) -> Coroutine[Any, Any, Any]:
        return self.x.recorded(key, kind, lambda: value)

    def _close(self, visit: _Visit, action: Any) -> Any:
        self.visits.pop(id(visit.node), None)
        replayed = visit.done is not None
        self._emit(visit.key, NodeFinished(visit.name, visit.key, action, replayed))
        return action

    def _fail(self, visit: _Visit, exc: Exception) -> None:
        self.visits.pop(id(visit.node), None)
        if not visit.failed:
            visit.failed = True
            self._emit(visit.key, NodeFailed(visit.name, visit.key, type(exc).__name__, str(exc)))

    def _emit(self, key: str, event: Any) -> None:
        # Nothing unless someone listens; safe from a thread. Node events say
        # whether they are replayed, so they are delivered during replay too.
        self.x.emit(key, event, marked=True)

    def _user_key(self, visit: _Visit, part: str) -> str | None:
        return f"{visit.key}.{part}" if self.durable else None

    # -- writes ----------------------------------------------------------------
    async def flush(self) -> None:
        """Write what sync nodes on the loop's thread queued, in order."""
        while self.pending:
            await self.pending.pop(0)

    def discard(self) -> None:
        pending, self.pending = self.pending, []
        for coro in pending:
            coro.close()

    def _submit(self, coro: Coroutine[Any, Any, _T]) -> _T | None:
        """Write from sync code: wait for it off the loop, queue it on the loop."""
        if threading.get_ident() == self.loop_thread:
            self.pending.append(coro)
            return None
        if self.stopped:
            coro.close()
            raise _Stopped
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        while True:
            try:
                return future.result(timeout=0.25)
            except TimeoutError:
                if future.done():
                    raise  # the write itself raised TimeoutError
                if self.stopped:
                    future.cancel()
                    raise _Stopped from None

    async def _record_outcome(
        self,
        key: str,
        pol: Policy[..., Any],
        kwargs: dict[str, Any],
        outcome: _Outcome,
        queued: bool,
    ) -> Any:
        token = _job.set(outcome)
        try:
            return await self.x.step(key, pol, (), kwargs)
        except Exception as exc:
            if queued and exc is outcome.error:
                return None  # the sync caller has raised it already
            raise
        finally:
            _job.reset(token)

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

    async def _user_async(self, visit: _Visit, key: str | None, fn: _AsyncFn, args: Any) -> Any:
        hook_token = current_hook.set(None)
        ctx_token = _current.set(Context(self.x, key)) if key is not None else None
        try:
            return await fn(*args)
        except Exception as exc:
            self._fail(visit, exc)
            raise
        finally:
            if ctx_token is not None:
                _current.reset(ctx_token)
            current_hook.reset(hook_token)

    async def _prep_async(self, node: BaseNode, fn: _AsyncFn, args: Any) -> Any:
        if self.pending:
            await self.flush()
        visit, answer = self._open(node)
        if answer is not _LIVE:
            return answer
        self.go_live()
        result = await self._user_async(visit, self._user_key(visit, "prep"), fn, args)
        self._counted(visit, result)
        if self.durable and isinstance(node, Flow):
            try:
                record = self._prep_record(visit, result)
            except Exception as exc:
                self._fail(visit, exc)
                raise
            await self._write(f"{visit.key}.prep", _PREP, record)
        return result

    async def _exec_async(self, node: BaseNode, index: int, fn: _AsyncFn, args: Any) -> Any:
        if self.pending:
            await self.flush()
        visit = self._visit(node)
        if visit.done is not None:
            return None
        if not self.durable:
            return await self._user_async(visit, None, fn, args)
        key, kwargs = self._exec_key(visit, index)
        token = _job.set((fn, args))
        try:
            return await self.x.step(key, _exec_policy(visit.name), (), kwargs)
        except Exception as exc:
            self._fail(visit, exc)
            raise
        finally:
            _job.reset(token)

    async def _post_async(self, node: BaseNode, fn: _AsyncFn, args: Any) -> Any:
        if self.pending:
            await self.flush()
        visit = self._visit(node)
        if visit.done is not None:
            return self._close(visit, codec.decode(visit.done["action"]))
        self.go_live()
        action = await self._user_async(visit, self._user_key(visit, "post"), fn, args)
        if self.durable:
            try:
                record = self._post_record(visit, action)
            except Exception as exc:
                self._fail(visit, exc)
                raise
            await self._write(f"{visit.key}.post", _POST, record)
        return self._close(visit, action)

    async def _walk_async(self, node: BaseNode, index: int, fn: _AsyncFn, args: Any) -> Any:
        if self.pending:
            await self.flush()
        visit = self._visit(node)
        if visit.done is not None:
            return None
        token = _scope.set(self._walk_scope(visit, index))
        try:
            result = await fn(*args)
        except Exception as exc:
            self._fail(visit, exc)
            raise
        finally:
            _scope.reset(token)
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
            raise _Stopped
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

    def _user_sync(self, visit: _Visit, key: str | None, fn: Callable[..., Any], args: Any) -> Any:
        hook_token = current_hook.set(None)
        ctx_token = _current.set(Context(self.x, key)) if key is not None else None
        try:
            return fn(*args)
        except Exception as exc:
            self._fail(visit, exc)
            raise
        finally:
            if ctx_token is not None:
                _current.reset(ctx_token)
            current_hook.reset(hook_token)

    def _prep_sync(self, node: BaseNode, fn: Callable[..., Any], args: Any) -> Any:
        visit, answer = self._open(node)
        if answer is not _LIVE:
            return answer
        self.go_live()
        result = self._user_sync(visit, self._user_key(visit, "prep"), fn, args)
        self._counted(visit, result)
        if self.durable and isinstance(node, Flow):
            try:
                record = self._prep_record(visit, result)
            except Exception as exc:
                self._fail(visit, exc)
                raise
            self._submit(self._write(f"{visit.key}.prep", _PREP, record))
        return result

    def _exec_sync(self, node: BaseNode, index: int, fn: Callable[..., Any], args: Any) -> Any:
        visit = self._visit(node)
        if visit.done is not None:
            return None
        if not self.durable:
            return self._user_sync(visit, None, fn, args)
        key, kwargs = self._exec_key(visit, index)
        pol = _exec_policy(visit.name)
        rec = self.x.replay.get(key)
        try:
            if rec is not None:
                return _answer(self.x, key, rec, pol.name, kwargs)
            hook_token = current_hook.set(None)
            ctx_token = _current.set(Context(self.x, key))
            try:
                outcome = _Outcome(fn(*args), None)
            except Exception as exc:
                outcome = _Outcome(None, exc)
            finally:
                _current.reset(ctx_token)
                current_hook.reset(hook_token)
            on_loop = threading.get_ident() == self.loop_thread
            recorded = self._submit(self._record_outcome(key, pol, kwargs, outcome, on_loop))
            if not on_loop:
                return recorded  # the value that won the record (S3)
            if outcome.error is not None:
                raise outcome.error
            return outcome.value
        except Exception as exc:
            self._fail(visit, exc)
            raise

    def _post_sync(self, node: BaseNode, fn: Callable[..., Any], args: Any) -> Any:
        visit = self._visit(node)
        if visit.done is not None:
            return self._close(visit, codec.decode(visit.done["action"]))
        self.go_live()
        action = self._user_sync(visit, self._user_key(visit, "post"), fn, args)
        if self.durable:
            try:
                record = self._post_record(visit, action)
            except Exception as exc:
                self._fail(visit, exc)
                raise
            self._submit(self._write(f"{visit.key}.post", _POST, record))
        return self._close(visit, action)

    def _walk_sync(self, node: BaseNode, index: int, fn: Callable[..., Any], args: Any) -> Any:
        visit = self._visit(node)
        if visit.done is not None:
            return None
        token = _scope.set(self._walk_scope(visit, index))
        try:
            return fn(*args)
        except Exception as exc:
            self._fail(visit, exc)
            raise
        finally:
            _scope.reset(token)
