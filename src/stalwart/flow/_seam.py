"""The one place where a flow hands control to user code.

Why this module exists: flows are durable under a durable runner
(:mod:`stalwart.flow.durable`). The durable layer must
see every call into a node's `prep`, `exec` and `post` (each batch item's
`exec` on its own), and every walk of a sub-flow, so that it can journal
finished `exec` results, snapshot the shared store after each node, and on
resume answer finished calls from the journal instead of running them again.
Rather than subclassing eleven classes, it installs a *hook*, and
every such call goes through exactly one function per kind:

    invoke(node, phase, index, fn, *args) -> result                 # sync
    invoke_async(node, phase, index, fn, *args) -> Awaitable[result]  # async

`fn(*args)` is the real call. Without a hook (the in-memory default) each
function costs one `ContextVar.get` and a compare before calling `fn`
directly; `invoke_async` is a plain function that returns `fn`'s own
coroutine, so the async path adds no coroutine frame either.

The calls a flow makes, and what a hook sees (``node`` is the copy that runs):

| phase  | fn                                     | args                             | index    |
| ------ | -------------------------------------- | -------------------------------- | -------- |
| "prep" | ``node.prep`` / ``node.prep_async``    | ``(shared,)``                    | 0        |
| "exec" | the attempt loop (retries, `wait`,     | ``(prep_res,)``; ``(item,)`` per | 0 / item |
|        | fallback) around ``exec(_async)``      | item of a batch node             | position |
| "post" | ``node.post`` / ``node.post_async``    | ``(shared, prep_res, exec_res)`` | 0        |
| "walk" | a flow walking its graph once          | ``(shared, params or None)``     | 0 / item |
|        | (``_walk`` / ``_walk_async``)          | (a batch flow passes the merged  | position |
|        |                                        | params of each item)             |          |

A flow's own work is a "walk" (a flow never calls its `exec`); its result is
the last action, which is what `Flow.post` returns by default. Sync nodes,
even inside an `AsyncFlow`, go through `invoke`; async ones through
`invoke_async`.

How the durable layer hooks in (what :mod:`stalwart.flow.durable` does):

- Implement `FlowHook` and install it for the run with `use_hook(hook)` (a
  `ContextVar`, so concurrent flows with and without durability do not see
  each other's hook, and tasks started by parallel batches inherit it).
- Key each call by its parent's key plus ``(phase, index)`` and a per-parent
  sequence number. Concurrent calls (parallel batch items and branches) are
  started in item order, and each enters `invoke_async` synchronously before
  its first await, so numbering on entry is deterministic; ``index`` gives
  the item position outright. A "walk" call opens a new parent scope; set it
  in a `ContextVar` inside `call_async`, which runs in the branch's own task.
- "exec" done: record the result (or the error, after retries and fallback).
  On replay return the record without calling `fn`.
- "post" done: the node has finished; record its action and a snapshot of
  `shared`. On resume, answer the finished nodes' "prep"/"exec"/"post" from
  the journal (a batch flow's "prep" result decides how many walks follow, so
  record it), restore `shared` in place before the first live call, and go
  live from there.
- `call` runs inside synchronous code: a journal write there must be
  synchronous too (or buffered until the next async point).

The other half of the seam is how a flow enters a run, the two places where
the graph classes hand themselves to the durable layer: `Flow.__stalwart_policy__`
(a flow run as a policy) and `AsyncFlow.run_async` inside a run. The durable
layer (:mod:`stalwart.flow.durable`, loaded with the package) installs a
`RunEntry` with `install_run_entry`; the graph modules ask `run_entry()`. So
the graph never imports the code that journals it: layers point one way.

A third door is open only while ``stalwart run PROGRAM.py`` runs a program
(:mod:`stalwart.flow.program`): a `TopLevel` installed with
`use_top_level` turns each flow the program runs outside any run
(``flow.run(shared)``, ``await flow.run_async(shared)``) into a durable run
of its own. Without one (always, outside that command) those calls run the
flow in memory, as PocketFlow does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, Protocol, TypeVar

from ..core.context import Context
from ..core.policy import Policy

__all__ = [
    "FlowHook",
    "Phase",
    "RunEntry",
    "TopLevel",
    "current_hook",
    "install_run_entry",
    "invoke",
    "invoke_async",
    "run_entry",
    "top_level",
    "use_hook",
    "use_top_level",
]

Phase = Literal["prep", "exec", "post", "walk"]

_T = TypeVar("_T")


class FlowHook(Protocol):
    """What a hook implements to observe or replace calls into user code.

    Each method must either call ``fn(*args)`` (and may record its result) or
    return a recorded result instead; it must not call the node's methods
    itself, so that retries, fallbacks and batches stay in one place.
    ``node`` is the `BaseNode` copy that runs (typed ``Any`` here because the
    node classes build on this module, not the other way round).
    """

    def call(
        self,
        node: Any,
        phase: Phase,
        index: int,
        fn: Callable[..., _T],
        args: tuple[Any, ...],
    ) -> _T: ...

    def call_async(
        self,
        node: Any,
        phase: Phase,
        index: int,
        fn: Callable[..., Awaitable[_T]],
        args: tuple[Any, ...],
    ) -> Awaitable[_T]: ...


current_hook: ContextVar[FlowHook | None] = ContextVar("stalwart_flow_hook", default=None)
_get_hook = current_hook.get


def invoke(node: Any, phase: Phase, index: int, fn: Callable[..., _T], *args: Any) -> _T:
    """Call user code from a flow, through the hook if one is installed."""
    hook = _get_hook()
    if hook is None:
        return fn(*args)
    return hook.call(node, phase, index, fn, args)


def invoke_async(
    node: Any, phase: Phase, index: int, fn: Callable[..., Awaitable[_T]], *args: Any
) -> Awaitable[_T]:
    """Async twin of `invoke`; a plain function so the default path adds no frame."""
    hook = _get_hook()
    if hook is None:
        return fn(*args)
    return hook.call_async(node, phase, index, fn, args)


@contextmanager
def use_hook(hook: FlowHook | None) -> Iterator[None]:
    """Install `hook` for the flows run in this context (None turns it off)."""
    token = current_hook.set(hook)
    try:
        yield
    finally:
        current_hook.reset(token)


class RunEntry(Protocol):
    """How a flow enters a run (what :mod:`stalwart.flow.durable` provides)."""

    def policy_of(self, flow: Any) -> Policy[..., Any]:
        """The flow as a policy: run it on a shared store, return the store."""
        ...

    def run_inside(self, ctx: Context, flow: Any, shared: Any) -> Awaitable[Any]:
        """``flow.run_async(shared)`` inside the run of ``ctx``, journaled."""
        ...


_entry: list[RunEntry] = []


def install_run_entry(entry: RunEntry) -> None:
    """Install how flows enter runs; the package does it once, at import."""
    _entry[:] = [entry]


def run_entry() -> RunEntry:
    """How flows enter runs (always installed once ``stalwart.flow`` is imported)."""
    if not _entry:
        raise RuntimeError("stalwart.flow.durable is not loaded; import stalwart.flow")
    return _entry[0]


class TopLevel(Protocol):
    """What runs the flows a program starts outside any run (see
    :mod:`stalwart.flow.program`): each call is a durable run; both return
    what PocketFlow's ``run`` returns, the flow's last action, and leave the
    results in the caller's ``shared``."""

    def run(self, flow: Any, shared: Any) -> Any:
        """``flow.run(shared)`` at a program's top level."""
        ...

    def run_async(self, flow: Any, shared: Any) -> Awaitable[Any]:
        """``await flow.run_async(shared)`` at a program's top level."""
        ...


_top: list[TopLevel] = []


def top_level() -> TopLevel | None:
    """The `TopLevel` of the program running now, if one is (else None:
    flows run outside a run stay in memory)."""
    return _top[0] if _top else None


@contextmanager
def use_top_level(top: TopLevel) -> Iterator[None]:
    """Make ``top`` run the flows started outside any run, for the whole
    process, until the block ends (one program at a time)."""
    if _top:
        raise RuntimeError("a program is running already: one program per process")
    _top.append(top)
    try:
        yield
    finally:
        _top.clear()
