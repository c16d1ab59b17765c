"""Executing one claimed run: launch it, drive it to an outcome, write that
outcome; and the child runs an execution spawns.

Every run, in memory or durable, goes through here after its claim. Where an
error belongs decides what happens to the run (S14): a transient store
failure or a lost lease leaves it to be resumed (here or by another worker);
anything the policy's own code raised fails it, once; a suspension parks it
in the store until its timer, signal or children wake it (S7).

:class:`Children` is the engine's :class:`~stalwart.core.engine.engine.Host`.
Children are runs like any other, in the parent's store; their ids derive
from the spawning step's key, so spawning again after a crash finds them
instead of starting them twice. A child spawned into the parent's queue is
this runner's own (it executes and resumes it without serving); one spawned
into another queue is left to the workers that serve that queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from functools import partial
from typing import Any

from ..core import codec
from ..core.engine.engine import Engine
from ..core.engine.unwind import as_exception, find_halt, find_suspend
from ..core.errors import (
    CancelledRun,
    SerializationError,
    StaleLeaseError,
    StoreError,
    StoreUnavailable,
)
from ..core.ledger import CHILDREN_WAIT, TERMINAL, RunRecord, RunStatus, child_group
from ..core.policy import Policy
from ..core.recorded import error_to_json
from ..stores.base import Store
from . import observe
from .awaiting import Outcomes
from .handle import Live
from .inputs import read_inputs, run_inputs
from .observe import started, trace_for
from .registry import Registry
from .table import RunTable, Settings

__all__ = ["Call", "Children", "Driver"]

#: The arguments of a run given as Python values (an ephemeral store's runs,
#: whose inputs need not be JSON), instead of read back from its row.
Call = tuple[tuple[Any, ...], dict[str, Any]]


class Driver:
    """Launches claimed runs as tasks and settles each one's outcome in the store."""

    def __init__(
        self,
        store: Store,
        table: RunTable,
        registry: Registry,
        outcomes: Outcomes,
        settings: Settings,
    ) -> None:
        self.store = store
        self.table = table
        self.settings = settings
        self.hooks = settings.hooks
        self.max_parallel = settings.max_parallel
        self.inline_sleep = settings.inline_sleep
        self._cleanups: set[asyncio.Future[None]] = set()
        #: The host of every execution launched here: its child runs.
        self.children = Children(store, table, registry, outcomes, self)

    async def claim_here(self, rec: RunRecord, pol: Policy[Any, Any], call: Call | None) -> None:
        """Claim the run and execute it here, unless it is already taken."""
        table = self.table
        if rec.id in table.live or rec.id in table.claiming:
            return
        table.claiming.add(rec.id)
        try:
            async with table.claims():  # never beside the worker loop's claims
                if rec.id not in table.live:
                    settings = self.settings
                    claimed = await self.store.claim(rec.id, settings.owner, settings.lease)
                    if claimed is not None:
                        self.launch(claimed, pol, call, prior=rec)
        finally:
            table.claiming.discard(rec.id)

    def launch(
        self,
        rec: RunRecord,
        pol: Policy[Any, Any],
        call: Call | None = None,
        prior: RunRecord | None = None,
    ) -> None:
        """Execute the claimed run ``rec`` in a task of its own.

        It is registered as live before any await, so the worker loop never
        mistakes a run this runner is starting for one it abandoned.
        ``prior`` is the run as it stood before the claim, if known: the log
        says whether the claim resumed it or recovered it from a dead holder.
        """
        if rec.id in self.table.live:
            return  # already executing here; its claim is the one that counts
        self.table.leases.taken += 1
        observe.claimed(rec, prior, rec.owner or "")
        durable = not self.store.ephemeral
        engine = Engine(
            rec.id,
            store=self.store if durable else None,
            fence=rec.fence,
            hooks=self.hooks,
            max_parallel=self.max_parallel,
            inline_sleep=self.inline_sleep,
        )
        engine.host = self.children
        engine.memory_store = self.store
        engine.parent_id = rec.parent_id
        engine.queue = rec.queue
        engine.tags = rec.tags
        for q in self.table.listeners.get(rec.id, ()):
            engine.listen(q)
        live = Live(engine)
        self.table.live[rec.id] = live
        self.table.mine.add(rec.id)  # executed here: resumed here when it wakes
        live.task = asyncio.create_task(self._drive(live, pol, rec, call), name=f"run:{rec.id}")
        live.task.add_done_callback(partial(self._task_done, live, rec))

    async def drain(self) -> None:
        """Wait for the settling of runs cancelled before their first step."""
        if self._cleanups:
            await asyncio.wait(list(self._cleanups))

    def _task_done(self, live: Live, rec: RunRecord, task: asyncio.Task[None]) -> None:
        """A run task cancelled before its first step never ran its own cleanup."""
        if live.done.done():
            return
        cleanup = asyncio.ensure_future(self._settle_unstarted(live, rec))
        self._cleanups.add(cleanup)
        cleanup.add_done_callback(self._cleanups.discard)

    async def _settle_unstarted(self, live: Live, rec: RunRecord) -> None:
        x = live.engine
        outcome: tuple[str, Any] = ("released", None)
        try:
            if live.cancel_requested or self.store.ephemeral:
                err = CancelledRun(f"run {x.run_id!r} was cancelled")
                await self._finish(x, "cancelled", err)
                outcome = ("cancelled", err)
            else:
                await self.store.release(x.run_id, x.fence)
        except StoreError as exc:
            outcome = ("lost", exc)
        finally:
            observe.ended(rec, outcome[0], outcome[1], 0.0)
            self._settled(live, outcome)

    async def _drive(
        self, live: Live, pol: Policy[Any, Any], rec: RunRecord, call: Call | None
    ) -> None:
        x = live.engine
        outcome: tuple[str, Any] = ("lost", None)
        began = time.monotonic()
        # Hooks see the execution begin and end in this task, around every
        # call: a tracer's run span is the parent of the run's step spans.
        info = observe.info_of(rec) if self.hooks else None
        try:
            if info is not None:
                await observe.run_started(self.hooks, info)
            outcome = await self._execute(live, pol, rec, call)
        except (StaleLeaseError, StoreUnavailable) as exc:
            # Fenced out (another worker owns the run and will finish it), or
            # the store is down: a worker resumes the run by replay once its
            # lease can be taken again.
            outcome = ("lost", exc)
        except Exception as exc:
            try:
                await self._finish(x, "failed", exc)
                outcome = ("failed", exc)
            except StoreError as store_exc:
                outcome = ("lost", store_exc)
        finally:
            if outcome[0] == "lost" and (live.lost or isinstance(outcome[1], StaleLeaseError)):
                self.table.leases.lost += 1
            if info is not None:
                error = outcome[1] if isinstance(outcome[1], BaseException) else None
                await observe.run_ended(self.hooks, info, outcome[0], error)
            observe.ended(rec, outcome[0], outcome[1], time.monotonic() - began)
            self._settled(live, outcome)
            if x.parent_id is not None and outcome[0] in TERMINAL:
                await self._wake_parent(x.parent_id, x.run_id)

    async def _execute(
        self, live: Live, pol: Policy[Any, Any], rec: RunRecord, call: Call | None
    ) -> tuple[str, Any]:
        """Run the policy from the top (replaying what is recorded) and write
        how it ended; the outcome for this process's waiters."""
        x = live.engine
        pol.declare_types()
        if call is None:
            data = read_inputs(x.run_id, rec.inputs)  # a bad row fails this run, not the worker
            call = (tuple(data["args"]), data["kwargs"])
        if x.fence > 1 and x.store is not None:  # a first claim has nothing to replay
            x.replay = await self.store.load_stored_steps(x.run_id)
        try:
            result = await x.run_root(pol, call[0], call[1])
        except asyncio.CancelledError:
            return await self._cancelled(live)
        except BaseException as exc:
            return await self._raised(x, exc)
        try:
            output = codec.dumps(result, f"result of run {x.run_id!r}")
        except SerializationError as exc:
            if not self.store.ephemeral:
                await self._finish(x, "failed", exc)
                return ("failed", exc)
            output = None  # in memory, a result need not be JSON
        await self.store.finish_run(x.run_id, x.fence, "succeeded", output, None)
        return ("succeeded", result)

    async def _cancelled(self, live: Live) -> tuple[str, Any]:
        x = live.engine
        if live.lost:
            return ("lost", None)  # another worker holds the run now; it writes, not us
        if not live.cancel_requested and not self.store.ephemeral:
            # Shutdown, not a cancel: hand the run back for someone else.
            with contextlib.suppress(Exception):
                await self.store.release(x.run_id, x.fence)
            return ("released", None)
        err = CancelledRun(f"run {x.run_id!r} was cancelled")
        await self._finish(x, "cancelled", err)
        return ("cancelled", err)

    async def _raised(self, x: Engine, exc: BaseException) -> tuple[str, Any]:
        halt = find_halt(exc)
        if halt is not None:
            raise halt.cause from None  # the store's problem: settled by _drive
        suspend = find_suspend(exc)
        if suspend is None:
            if isinstance(exc, KeyboardInterrupt):
                with contextlib.suppress(Exception):
                    await self.store.release(x.run_id, x.fence)
                raise exc
            # What the policy's own code raised: the run fails with it, once.
            failure = as_exception(exc)
            await self._finish(x, "failed", failure)
            return ("failed", failure)
        # If what it waits for is already there, the store leaves the run
        # ready; settling wakes the worker loop, which resumes it or
        # recomputes the next wake time.
        await self.store.suspend_run(x.run_id, x.fence, suspend.wake_at, suspend.waiting_for)
        return ("suspended", None)

    async def _finish(self, x: Engine, status: RunStatus, err: BaseException) -> None:
        await self.store.finish_run(x.run_id, x.fence, status, None, error_to_json(err))

    def _settled(self, live: Live, outcome: tuple[str, Any]) -> None:
        """Every way a run stops here ends here: a final outcome of a memory
        run is kept (the only copy of its value), then waiters are told."""
        if outcome[0] in TERMINAL and self.store.ephemeral:
            self.table.kept[live.engine.run_id] = outcome
        self.table.finish(live, outcome)

    async def _wake_parent(self, parent_id: str, child_id: str) -> None:
        """The last child of a group to finish makes its waiting parent ready."""
        prefix = child_group(child_id)
        with contextlib.suppress(StoreError):
            if await self.store.unfinished_children(parent_id, prefix) == 0:
                await self.store.wake(parent_id, f"{CHILDREN_WAIT}{prefix}")
                self.table.wake_worker()


class Children:
    """Spawns child runs into the store and awaits them (in memory, directly)."""

    def __init__(
        self,
        store: Store,
        table: RunTable,
        registry: Registry,
        outcomes: Outcomes,
        driver: Driver,
    ) -> None:
        self.store = store
        self.table = table
        #: The runner's policies by name: where an option offered by name
        #: (``options=["web_search"]``) is looked up after the calling step's
        #: application context.
        self.registry = registry
        self.outcomes = outcomes
        self.driver = driver

    def find_policy(self, name: str) -> Policy[Any, Any] | None:
        return self.registry.find(name)

    async def spawn_children(
        self,
        parent: Engine,
        pol: Policy[Any, Any],
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        ids: list[str],
        queue: str | None,
        priority: int,
    ) -> None:
        self.registry.register(pol)
        memory = self.store.ephemeral
        # Each child keeps the trace context of the step that spawned it, so
        # it joins that trace on whichever worker runs it.
        hooks = self.driver.hooks
        runs = [
            RunRecord(
                run_id,
                pol.name,
                "" if memory else run_inputs(pol, run_id, args, kwargs),
                code_version=self.driver.settings.version_of(pol),
                queue=queue or parent.queue,
                priority=priority,
                parent_id=parent.run_id,
                trace=trace_for(hooks, run_id, pol.name) if hooks else None,
                tags=parent.tags,  # a child is found by its parent's tags
            )
            for run_id, (args, kwargs) in zip(ids, calls, strict=True)
        ]
        if queue is None:
            self.table.mine.update(ids)
        await self.store.create_runs(runs)
        for rec in runs:
            started(rec)
        if memory:  # nobody else could ever execute them
            for rec, call in zip(runs, calls, strict=True):
                await self.driver.claim_here(rec, pol, call)
            return
        self.table.wake_worker()

    def live_engine(self, run_id: str) -> Engine | None:
        """The engine of ``run_id`` if this runner executes it now."""
        live = self.table.live.get(run_id)
        return None if live is None else live.engine

    def wake_worker(self) -> None:
        self.table.wake_worker()

    async def await_memory_children(self, ids: list[str]) -> list[dict[str, Any]]:
        """The children's outcomes, awaited in this process (an ephemeral store)."""
        outcomes: list[dict[str, Any]] = []
        for run_id in ids:
            try:
                value = await self.outcomes.outcome(run_id)
            except CancelledRun:
                outcomes.append({"status": "cancelled"})
            except Exception as exc:
                outcomes.append({"status": "failed", "exception": exc})
            else:
                outcomes.append({"status": "succeeded", "value": value})
        return outcomes
