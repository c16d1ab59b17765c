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
  snapshot of the store after every finished node (`.shared`).
* ``V.prep`` for flows only: the result of a flow's own ``prep`` (for a batch
  flow, the param dicts that decide the walks), and the store's change.

On resume the run executes again from the top (S2): a visit whose ``V.post``
exists is answered from the ledger, its ``prep``, ``exec`` and ``post``
never running again; the first visit without one is the node that was
running. Before the first user code runs live, the shared store is restored
in place to the initial store plus every recorded change, that is, as it was
after the last finished node; then the node runs ``prep`` and ``post`` live,
with each ``exec`` (each batch item) that had finished answered from its
record. ``exec`` must not write the store (PocketFlow's rule): a write there
is lost if the node was interrupted after it.

Sync flows run on a worker thread (user code stays off the event loop); the
recorder's writes go to the loop with `asyncio.run_coroutine_threadsafe` and
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
``runner.stream()``; see `.events`).

This module is the flow's entry into a run; `.recorder` is the hook that
records it. Both use only the engine's public journaling API
(``docs/journaling.md``): keys from ``Context.next_key``, contexts from
``Engine.context``, an ``exec`` as ``Engine.run_unit``, the flow's own
records with ``Engine.recorded`` and read back with
``Engine.replayed_values``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from typing import Any

from ..core.context import Context
from ..core.policy import Policy
from ._seam import current_hook, install_run_entry
from .events import flow_name
from .flow import Flow
from .node import AsyncNode, BaseNode
from .recorder import FlowRecorder
from .visits import walk_scope

__all__ = ["FlowPolicy", "flow_policy", "run_flow", "run_here"]


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

    def __stalwart_version__(self) -> list[Any]:
        return [self.flow]


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


async def run_flow(ctx: Context, flow: BaseNode, shared: Any, root: Context | None = None) -> Any:
    """Run ``flow`` on ``shared`` as part of the run ``ctx`` belongs to.

    Returns the flow's last action. The recorder's keys hang under ``root``
    (default: ``ctx``, whose own key sequence must then be free, as in a
    flow's policy). Durable runs are journaled; in-memory ones run the flow
    as is, with a hook that emits events only when someone streams the run.
    """
    engine = ctx.engine
    if not engine.durable and not engine.watched:
        if isinstance(flow, AsyncNode):
            return await flow._run_async(shared)
        return await asyncio.to_thread(flow._run, shared)
    recorder = FlowRecorder(engine, root or ctx, shared, flow_name(flow))
    hook_token = current_hook.set(recorder)
    scope_token = walk_scope.set(recorder.root)
    try:
        if isinstance(flow, AsyncNode):
            action = await flow._run_async(shared)
        else:
            # The thread gets a copy of this context: the hook and scope included.
            action = await asyncio.to_thread(flow._run, shared)
        await recorder.flush()
        recorder.go_live()  # everything was replayed: the store as the flow left it
        return action
    except Exception:
        # Keep what finished before the error (a caller may catch it and go on).
        with contextlib.suppress(Exception):
            await recorder.flush()
        recorder.stopped = True
        recorder.discard()
        raise
    except BaseException:  # cancelled, or suspended: stop, write nothing more
        recorder.stopped = True  # a sync flow's thread stops at its next node
        recorder.discard()
        raise
    finally:
        walk_scope.reset(scope_token)
        current_hook.reset(hook_token)


async def run_here(ctx: Context, flow: BaseNode, shared: Any) -> Any:
    """``flow.run_async(shared)`` inside a run: a journaled part of that run,
    its records under a key of ``ctx``'s own."""
    return await run_flow(ctx, flow, shared, ctx.engine.context(ctx.next_key()))


class _RunEntry:
    """How flows enter runs, installed in the seam (see `._seam.RunEntry`)."""

    def policy_of(self, flow: Any) -> Policy[..., Any]:
        return flow_policy(flow)

    def run_inside(self, ctx: Context, flow: Any, shared: Any) -> Any:
        return run_here(ctx, flow, shared)


install_run_entry(_RunEntry())
