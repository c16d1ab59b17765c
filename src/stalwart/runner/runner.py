"""Runner: starts, awaits, resumes, signals, cancels and streams runs.

``Runner()`` runs in memory; ``Runner("sqlite:///agents.db")`` makes every run
durable. Both drive the same :class:`~stalwart.core.engine.execution.Execution`; a durable
runner adds a claim on each run it executes (a lease with a fencing token),
a heartbeat, and a background loop that wakes suspended runs and recovers
runs a dead process left (S7, S8).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import Any, ParamSpec, TypeVar, overload

from ..core import codec
from ..core.context import SupportsPolicy
from ..core.engine.control import as_exception, find_halt, find_suspend
from ..core.engine.execution import Execution
from ..core.engine.journal import Journal
from ..core.errors import (
    CancelledRun,
    CorruptedRecord,
    DuplicatePolicy,
    InputMismatchError,
    RunNotFound,
    SerializationError,
    StaleLeaseError,
    StoreError,
    StoreUnavailable,
)
from ..core.events import Event, Hook, RunFinished
from ..core.ledger import CHILDREN_WAIT, TERMINAL, RunRecord, StepRecord, check_run_id, child_group
from ..core.policy import Policy, as_policy, same_policy, where_defined
from ..core.recorded import error_from_json, error_to_json, recorded_outcome
from ..stores import open_store
from ..stores.base import Store, this_host
from .handle import EventBuffer, Live, RunHandle
from .identity import check_same_run, code_version, legacy_ref, read_inputs, run_inputs, same_inputs

_log = logging.getLogger("stalwart.runner")

__all__ = ["RunHandle", "Runner"]

P = ParamSpec("P")
R = TypeVar("R")


def _run_id(run_id: str | None) -> str:
    """The id a run is started under: a random one, or the caller's, checked."""
    return uuid.uuid4().hex if run_id is None else check_run_id(run_id)


class Runner:
    """Runs policies: in memory by default, durably given a store URL.

    ``store``: None or "memory", "sqlite:///path.db" (durability settings as
    query parameters, see the README), "postgresql://…", or a Store.
    ``hooks`` observe or veto calls; ``max_parallel`` caps concurrent option
    calls; ``lease`` is how long a claim on a run lasts without a heartbeat;
    ``poll_interval`` bounds how late a timer or a signal from another process
    is noticed; ``recover`` makes the runner pick up abandoned runs by itself.
    As a worker: ``queues`` it takes runs from (None: all), ``concurrency``
    (most runs it executes at once), ``shutdown_timeout`` (how long
    :meth:`serve` lets held runs finish on SIGTERM before handing them back).
    """

    def __init__(
        self,
        store: str | Store | None = None,
        *,
        hooks: Sequence[Hook] = (),
        max_parallel: int | None = None,
        policies: Sequence[Any] = (),
        lease: float = 30.0,
        poll_interval: float = 0.5,
        inline_sleep: float = 1.0,
        recover: bool = True,
        code_version: str | None = None,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        shutdown_timeout: float = 30.0,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = open_store(store)
        self.queues = None if queues is None else tuple(queues)
        self.concurrency = concurrency
        self.shutdown_timeout = shutdown_timeout
        self._draining = False
        self.hooks = tuple(hooks)
        self.max_parallel = max_parallel
        self.lease = lease
        self.poll_interval = poll_interval
        self.inline_sleep = inline_sleep
        self.auto_recover = recover
        self.code_version = code_version
        self.owner = f"{this_host()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._policies: dict[str, Policy[Any, Any]] = {}
        self._legacy: dict[str, Policy[Any, Any]] = {}  # 0.1 rows: module:qualname
        self._unknown: set[str] = set()
        # run id -> (not before, last delay): runs dropped on StoreUnavailable
        self._retry_after: dict[str, tuple[float, float]] = {}
        for p in policies:
            self.register(p)
        self._live: dict[str, Live] = {}
        self._memory_runs: dict[str, tuple[str, Any, str]] = {}  # id -> status, outcome, inputs
        self._listeners: dict[str, list[asyncio.Queue[Any]]] = {}
        self._opened = False
        self._closed = False
        self._bg: asyncio.Task[None] | None = None
        self._poke: asyncio.Event | None = None
        self._watchers: dict[str, asyncio.Event] = {}
        # Ids with a claim in flight: neither start() nor the background loop
        # may claim a run the other is claiming (it would claim itself twice).
        self._claiming: set[str] = set()
        self._cleanups: set[asyncio.Future[None]] = set()
        self._claim_lock: asyncio.Lock | None = None

    # -- lifecycle -----------------------------------------------------------
    async def __aenter__(self) -> Runner:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._opened:
            return
        self._opened = True
        self._closed = False
        if self.store is not None:
            await self.store.open()
            self._poke = asyncio.Event()
            self._bg = asyncio.create_task(self._background(), name="stalwart-runner")

    async def close(self) -> None:
        """Stop the background loop, give back runs still held, close the store."""
        if self._bg is not None:
            self._bg.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._bg
            self._bg = None
        for live in list(self._live.values()):
            if live.task is not None and not live.task.done():
                live.task.cancel()
                await asyncio.wait([live.task])  # neither raises nor swallows our own cancel
        if self._cleanups:
            await asyncio.wait(list(self._cleanups))
        if self.store is not None and self._opened:
            await self.store.close()
        self._opened = False
        self._closed = self.store is not None  # in memory there is nothing to leak

    def register(self, target: Any) -> Policy[Any, Any]:
        """Make a policy known, so runs of it can be resumed by this runner.

        A run row names its policy; only registered policies answer to that
        name (S13), and one name means one policy: registering a different
        policy under a name that is taken raises :class:`DuplicatePolicy`.
        """
        pol = as_policy(target)
        known = self._policies.get(pol.name)
        if known is not None and known is not pol and not same_policy(known, pol):
            raise DuplicatePolicy(
                f"two different policies are named {pol.name!r}: "
                f"{where_defined(known)} and {where_defined(pol)}; "
                "give one of them another name (@policy(name=...), Agent(name=...))"
            )
        if known is None:
            self._policies[pol.name] = pol
            self._legacy.setdefault(legacy_ref(pol), pol)
        return known or pol

    def find_policy(self, name: str) -> Policy[Any, Any] | None:
        """The registered policy a run row names (its ``policy`` field), if
        this runner was given it; never an import (S13)."""
        return self._policies.get(name) or self._legacy.get(name)

    # -- starting ------------------------------------------------------------
    @overload
    async def run(
        self, target: Policy[P, R], /, *args: Any, run_id: str | None = None, **kwargs: Any
    ) -> R: ...
    @overload
    async def run(
        self,
        target: SupportsPolicy[P, R],
        /,
        *args: Any,
        run_id: str | None = None,
        **kwargs: Any,
    ) -> R: ...
    @overload
    async def run(
        self,
        target: Callable[..., Awaitable[R]],
        /,
        *args: Any,
        run_id: str | None = None,
        **kwargs: Any,
    ) -> R: ...
    async def run(
        self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any
    ) -> Any:
        """Run ``target`` to the end and return its result (or raise its error)."""
        store = self.store
        if store is None and not self._listeners and not self.hooks and run_id is None:
            # In memory with nobody watching: no bookkeeping beyond the call.
            pol = as_policy(target)
            execution = Execution(
                uuid.uuid4().hex, max_parallel=self.max_parallel, inline_sleep=self.inline_sleep
            )
            execution.host = self
            return await execution.run_root(pol, args, kwargs)
        run_id = _run_id(run_id)
        await self._start(target, args, kwargs, run_id)
        return await RunHandle(self, run_id).result()

    def run_sync(self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any) -> Any:
        """Run ``target`` from synchronous code (a script); closes the runner after."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "run_sync() cannot be called from a running event loop; use `await runner.run(...)`"
            )

        async def main() -> Any:
            try:
                return await self.run(target, *args, run_id=run_id, **kwargs)
            finally:
                await self.close()

        return asyncio.run(main())

    async def start(
        self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any
    ) -> RunHandle:
        """Start a run and return its handle at once.

        ``run_id`` is an idempotency key: starting an id that exists returns
        that run, provided the policy and inputs are the same. The handle's
        :meth:`~RunHandle.events` yields every event from the run's start,
        even those that happened before it was called.
        """
        run_id = _run_id(run_id)
        queue: asyncio.Queue[Any] = EventBuffer()
        await self._start_listened(target, args, kwargs, run_id, queue)
        return RunHandle(self, run_id, queue)

    async def _start_listened(
        self,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str,
        queue: asyncio.Queue[Any],
    ) -> None:
        """Start the run with ``queue`` listening from its very first event."""
        self._listeners.setdefault(run_id, []).append(queue)
        try:
            await self._start(target, args, kwargs, run_id)
        except BaseException:
            self._drop_listener(run_id, queue)
            raise

    def _drop_listener(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        listeners = self._listeners.get(run_id)
        if listeners is not None and queue in listeners:
            listeners.remove(queue)
            if not listeners:
                del self._listeners[run_id]
        live = self._live.get(run_id)
        if live is not None:
            live.execution.unlisten(queue)

    async def _start(
        self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run_id: str
    ) -> None:
        await self.open()
        pol = self.register(target)
        try:
            inputs = run_inputs(pol, run_id, args, kwargs)
        except SerializationError:
            if self.store is not None:
                raise
            inputs = ""  # in memory, inputs need not be JSON
        if self.store is None:
            self._start_memory(run_id, pol, args, kwargs, inputs)
            return
        version = self.code_version if self.code_version is not None else code_version(pol)
        rec = RunRecord(run_id, pol.name, inputs, code_version=version)
        stored, created = await self.store.create_run(rec)
        if not created:
            check_same_run(pol, stored, rec, self.find_policy(stored.policy) is pol)
        if (
            run_id not in self._live
            and run_id not in self._claiming
            and stored.status not in TERMINAL
        ):
            self._claiming.add(run_id)
            try:
                async with self._claims():  # never beside the background loop's claims
                    if run_id not in self._live:
                        claimed = await self.store.claim(run_id, self.owner, self.lease)
                        if claimed is not None:
                            await self._launch(claimed, pol)
            finally:
                self._claiming.discard(run_id)
            # Let the run reach its first await: starting many runs in a loop
            # then holds one at a time, not all of them at once (B7).
            await asyncio.sleep(0)

    def _start_memory(
        self,
        run_id: str,
        pol: Policy[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        inputs: str,
    ) -> RunHandle:
        known = self._memory_runs.get(run_id)
        if known is not None or run_id in self._live:
            if known is not None and not same_inputs(pol, known[2], inputs):
                raise InputMismatchError(f"run {run_id!r} exists with other inputs")
            return RunHandle(self, run_id)
        execution = Execution(
            run_id,
            hooks=self.hooks,
            max_parallel=self.max_parallel,
            inline_sleep=self.inline_sleep,
        )
        execution.host = self
        live = Live(execution)
        for q in self._listeners.get(run_id, ()):
            execution.listen(q)
        self._live[run_id] = live
        self._memory_runs[run_id] = ("running", None, inputs)
        live.task = asyncio.create_task(self._drive_memory(live, pol, args, kwargs))
        live.task.add_done_callback(partial(self._task_done, live))
        return RunHandle(self, run_id)

    async def _drive_memory(
        self, live: Live, pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        run_id = live.execution.run_id
        inputs = self._memory_runs[run_id][2]
        try:
            result = await live.execution.run_root(pol, args, kwargs)
        except asyncio.CancelledError:
            outcome: tuple[str, Any] = ("cancelled", CancelledRun(f"run {run_id!r} was cancelled"))
        except Exception as exc:
            outcome = ("failed", exc)
        else:
            outcome = ("succeeded", result)
        self._memory_runs[run_id] = (outcome[0], outcome[1], inputs)
        self._finish_live(live, outcome)

    def _finish_live(self, live: Live, outcome: tuple[str, Any]) -> None:
        run_id = live.execution.run_id
        if self._live.get(run_id) is live:
            del self._live[run_id]
        if outcome[0] == "lost" and isinstance(outcome[1], StoreUnavailable):
            # Not straight back: a store that refuses this run's writes now
            # would be asked again a hundred times a second (S14).
            delay = min(30.0, 2 * self._retry_after.get(run_id, (0.0, self.poll_interval / 2))[1])
            self._retry_after[run_id] = (time.monotonic() + delay, delay)
        else:
            self._retry_after.pop(run_id, None)
        if not live.done.done():
            live.done.set_result(outcome)
        if self._poke is not None:
            self._poke.set()  # room for another run: claim now, not at the next poll
        status, value = outcome
        if status in TERMINAL:
            err = None if status == "succeeded" else f"{type(value).__name__}: {value}"
            event = RunFinished(run_id, status, value if status == "succeeded" else None, err)
            for q in self._listeners.pop(run_id, []):
                q.put_nowait(event)
        watcher = self._watchers.pop(run_id, None)
        if watcher is not None:
            watcher.set()

    # -- durable execution ---------------------------------------------------
    async def _launch(self, rec: RunRecord, pol: Policy[Any, Any]) -> None:
        # Registered as live before any await, so the background loop never
        # mistakes a run this runner is starting for one it abandoned.
        assert self.store is not None
        if rec.id in self._live:
            return  # already executing here; its claim is the one that counts
        execution = Execution(
            rec.id,
            store=self.store,
            fence=rec.fence,
            hooks=self.hooks,
            max_parallel=self.max_parallel,
            inline_sleep=self.inline_sleep,
        )
        execution.host = self
        execution.parent_id = rec.parent_id
        execution.queue = rec.queue
        for q in self._listeners.get(rec.id, ()):
            execution.listen(q)
        live = Live(execution)
        self._live[rec.id] = live
        live.task = asyncio.create_task(self._drive(live, pol, rec.inputs), name=f"run:{rec.id}")
        live.task.add_done_callback(partial(self._task_done, live))

    def _task_done(self, live: Live, task: asyncio.Task[None]) -> None:
        """A run task cancelled before its first step never ran its own cleanup."""
        if live.done.done():
            return
        if self.store is None:
            run_id = live.execution.run_id
            inputs = self._memory_runs.get(run_id, ("", None, ""))[2]
            err = CancelledRun(f"run {run_id!r} was cancelled")
            self._memory_runs[run_id] = ("cancelled", err, inputs)
            self._finish_live(live, ("cancelled", err))
            return
        cleanup = asyncio.ensure_future(self._settle_unstarted(live))
        self._cleanups.add(cleanup)
        cleanup.add_done_callback(self._cleanups.discard)

    async def _settle_unstarted(self, live: Live) -> None:
        assert self.store is not None
        x = live.execution
        outcome: tuple[str, Any] = ("released", None)
        try:
            if live.cancel_requested:
                err = CancelledRun(f"run {x.run_id!r} was cancelled")
                await self.store.finish_run(
                    x.run_id, x.fence, "cancelled", None, error_to_json(err)
                )
                outcome = ("cancelled", err)
            else:
                await self.store.release(x.run_id, x.fence)
        except StoreError as exc:
            outcome = ("lost", exc)
        finally:
            self._finish_live(live, outcome)

    async def _drive(self, live: Live, pol: Policy[Any, Any], inputs: str) -> None:
        """Execute one claimed run to its end, its suspension, or its loss.

        Where an error belongs decides what happens (S14): a transient store
        failure or a lost lease leaves the run to be resumed (here or by
        another worker); anything else fails the run with its message, once.
        """
        store = self.store
        assert store is not None
        x = live.execution
        outcome: tuple[str, Any] = ("lost", None)
        try:
            pol.declare_types()
            data = read_inputs(x.run_id, inputs)  # a bad row fails this run, not the worker
            if x.fence > 1:  # a first claim has no steps to replay: skip the query
                x.replay = await store.load_steps(x.run_id)
            try:
                result = await x.run_root(pol, tuple(data["args"]), data["kwargs"])
            except asyncio.CancelledError:
                if live.lost:
                    return  # another worker holds the run now; it writes, not us
                if not live.cancel_requested:
                    # Shutdown, not a cancel: hand the run back for someone else.
                    with contextlib.suppress(Exception):
                        await store.release(x.run_id, x.fence)
                    outcome = ("released", None)
                    return
                err = CancelledRun(f"run {x.run_id!r} was cancelled")
                await store.finish_run(x.run_id, x.fence, "cancelled", None, error_to_json(err))
                outcome = ("cancelled", err)
                return
            except BaseException as exc:
                halt = find_halt(exc)
                if halt is not None:
                    raise halt.cause from None  # the run's problem: settled below
                suspend = find_suspend(exc)
                if suspend is None:
                    if isinstance(exc, KeyboardInterrupt):
                        with contextlib.suppress(Exception):
                            await store.release(x.run_id, x.fence)
                        raise
                    # What the policy's own code raised: the run fails with it, once.
                    failure = as_exception(exc)
                    await store.finish_run(
                        x.run_id, x.fence, "failed", None, error_to_json(failure)
                    )
                    outcome = ("failed", failure)
                    return
                # If what it waits for is already there, the store leaves the
                # run ready; _finish_live pokes the loop, which resumes it or
                # recomputes the next wake time.
                await store.suspend_run(x.run_id, x.fence, suspend.wake_at, suspend.waiting_for)
                outcome = ("suspended", None)
                return
            try:
                output = codec.dumps(result, f"result of run {x.run_id!r}")
            except SerializationError as exc:
                await store.finish_run(x.run_id, x.fence, "failed", None, error_to_json(exc))
                outcome = ("failed", exc)
                return
            await store.finish_run(x.run_id, x.fence, "succeeded", output, None)
            outcome = ("succeeded", result)
        except (StaleLeaseError, StoreUnavailable) as exc:
            # Fenced out (another worker owns the run and will finish it), or
            # the store is down: the background loop resumes the run by
            # replay once its lease can be taken again.
            outcome = ("lost", exc)
        except Exception as exc:
            try:
                await store.finish_run(x.run_id, x.fence, "failed", None, error_to_json(exc))
                outcome = ("failed", exc)
            except StoreError as store_exc:
                outcome = ("lost", store_exc)
        finally:
            self._finish_live(live, outcome)
            if x.parent_id is not None and outcome[0] in TERMINAL:
                await self._wake_parent(x.parent_id, x.run_id)

    async def _wake_parent(self, parent_id: str, child_id: str) -> None:
        """The last child of a group to finish makes its waiting parent ready."""
        assert self.store is not None
        prefix = child_group(child_id)
        with contextlib.suppress(StoreError):
            if await self.store.unfinished_children(parent_id, prefix) == 0:
                await self.store.wake(parent_id, f"{CHILDREN_WAIT}{prefix}")
                if self._poke is not None:
                    self._poke.set()

    # -- child runs (the runtime's Host) ----------------------------------------
    async def spawn_children(
        self,
        parent: Journal,
        pol: Policy[Any, Any],
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        ids: list[str],
        queue: str | None,
        priority: int,
    ) -> None:
        self.register(pol)
        if self.store is None:
            for run_id, (args, kwargs) in zip(ids, calls, strict=True):
                self._start_memory(run_id, pol, args, kwargs, "")
            return
        version = self.code_version if self.code_version is not None else code_version(pol)
        ref = pol.name
        runs = [
            RunRecord(
                run_id,
                ref,
                run_inputs(pol, run_id, args, kwargs),
                code_version=version,
                queue=queue or parent.queue,
                priority=priority,
                parent_id=parent.run_id,
            )
            for run_id, (args, kwargs) in zip(ids, calls, strict=True)
        ]
        await self.store.create_runs(runs)
        if self._poke is not None:
            self._poke.set()

    async def await_memory_children(self, ids: list[str]) -> list[dict[str, Any]]:
        outcomes: list[dict[str, Any]] = []
        for run_id in ids:
            try:
                value = await self._await_outcome(run_id)
            except CancelledRun:
                outcomes.append({"status": "cancelled"})
            except Exception as exc:
                outcomes.append({"status": "failed", "exception": exc})
            else:
                outcomes.append({"status": "succeeded", "value": value})
        return outcomes

    # -- queues and workers ------------------------------------------------------
    async def enqueue(
        self,
        target: Any,
        /,
        *args: Any,
        run_id: str | None = None,
        queue: str = "default",
        priority: int = 0,
        delay: float | None = None,
        **kwargs: Any,
    ) -> RunHandle:
        """Put a run on ``queue`` for any worker to execute, and return its handle.

        Higher ``priority`` runs are claimed first; ``delay`` (seconds) holds
        the start back. Enqueuing an id that exists returns that run.
        """
        if self.store is None:
            raise StoreError("enqueue needs a durable store; in memory, use start()")
        await self.open()
        run_id = _run_id(run_id)
        pol = self.register(target)
        inputs = run_inputs(pol, run_id, args, kwargs)
        version = self.code_version if self.code_version is not None else code_version(pol)
        rec = RunRecord(
            run_id,
            pol.name,
            inputs,
            code_version=version,
            queue=queue,
            priority=priority,
            wake_at=None if not delay else time.time() + delay,
        )
        stored, created = await self.store.create_run(rec)
        if not created:
            check_same_run(pol, stored, rec, self.find_policy(stored.policy) is pol)
        if self._poke is not None:
            self._poke.set()
        return RunHandle(self, run_id)

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        """Limit a queue across all workers: concurrent runs, and starts per second."""
        if self.store is None:
            raise StoreError("queue limits need a durable store")
        await self.open()
        await self.store.set_queue(name, concurrency=concurrency, rate=rate)

    async def serve(self, stop: asyncio.Event | None = None) -> None:
        """Work as a worker until ``stop`` is set or SIGTERM/SIGINT arrives.

        Then stop claiming, give held runs ``shutdown_timeout`` seconds to
        finish, and hand the rest back to the store for another worker.
        """
        import signal as _signal

        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = []
        for sig in (_signal.SIGTERM, _signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
            except (RuntimeError, ValueError, NotImplementedError):
                pass  # not the main thread: the caller sets ``stop``
        try:
            await self.open()
            await stop.wait()
            self._draining = True
            tasks = [lv.task for lv in self._live.values() if lv.task is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=self.shutdown_timeout)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            await self.close()
            self._draining = False

    async def _background(self) -> None:
        """Heartbeats, timers, signals from elsewhere, and recovery, in one loop."""
        store = self.store
        assert store is not None and self._poke is not None
        next_beat = 0.0
        while True:
            try:
                now = time.time()
                if now >= next_beat:
                    await self._beat()
                    next_beat = now + self.lease / 3
                claimed = await self._claim_ready() if self.auto_recover else []
                wake = await store.next_wake()
                delay = min(self.poll_interval, max(0.0, next_beat - time.time()))
                if wake is not None and (wake > time.time() or claimed):
                    # A wake time already past that we did not claim belongs to
                    # a run we cannot take (other queue, unknown policy, no
                    # room): waiting for it would spin; poll instead.
                    delay = min(delay, max(0.0, wake - time.time()))
            except StoreUnavailable:
                delay = self.poll_interval  # the store is down; try again later
            except Exception:  # never let one bad row stop heartbeats and recovery
                _log.exception("stalwart runner %s: background loop error", self.owner)
                delay = self.poll_interval
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._poke.wait()

    async def _beat(self) -> None:
        """Extend our leases; stop the runs asked to cancel, and at once the
        runs another worker has taken over (S8: a replaced worker stops)."""
        assert self.store is not None
        live_ids = [rid for rid, lv in self._live.items() if lv.execution.store is not None]
        beat = await self.store.heartbeat(self.owner, self.lease, live_ids)
        for run_id in beat.lost:
            live = self._live.get(run_id)
            if live is not None and live.task is not None and not live.task.done():
                _log.warning("run %r: another worker took it over; stopping here", run_id)
                live.lost = True
                live.task.cancel()
        for run_id in beat.cancel:
            live = self._live.get(run_id)
            if live is not None and live.task is not None and not live.lost:
                live.cancel_requested = True
                live.task.cancel()

    async def _claim_ready(self) -> list[str]:
        """Claim and launch ready runs until none is left or there is no room."""
        assert self.store is not None
        claimed: list[str] = []
        async with self._claims():  # recover(), start() and the background loop, one at a time
            while not self._draining:
                room = (
                    64 if self.concurrency is None else min(64, self.concurrency - len(self._live))
                )
                if room <= 0:
                    break
                batch = await self.store.claim_due(
                    self.owner, self.lease, room, self._resolvable, self.queues
                )
                for rec in batch:
                    pol = self.find_policy(rec.policy)
                    if pol is None:
                        await self.store.release(rec.id, rec.fence)
                        continue
                    await self._launch(rec, pol)
                    claimed.append(rec.id)
                if len(batch) < room:
                    break  # nothing more is ready; a full batch may have more behind it
        return claimed

    def _claims(self) -> asyncio.Lock:
        if self._claim_lock is None:
            self._claim_lock = asyncio.Lock()
        return self._claim_lock

    def _resolvable(self, rec: RunRecord) -> bool:
        if rec.id in self._live or rec.id in self._claiming:
            return False
        retry = self._retry_after.get(rec.id)
        if retry is not None and time.monotonic() < retry[0]:
            return False
        if self.find_policy(rec.policy) is not None:
            return True
        if rec.policy not in self._unknown:  # said once per name, not every poll
            self._unknown.add(rec.policy)
            _log.warning(
                "run %r needs policy %r, which this runner was not given "
                "(Runner(policies=[...]) or --app); it stays for a runner that has it",
                rec.id,
                rec.policy,
            )
        return False

    async def recover(self) -> list[RunHandle]:
        """Resume every run that is ready here: abandoned, woken, or pending."""
        await self.open()
        if self.store is None:
            return []
        return [RunHandle(self, run_id) for run_id in await self._claim_ready()]

    # -- awaiting ------------------------------------------------------------
    async def _await_outcome(self, run_id: str) -> Any:
        delay = 0.01
        while True:
            live = self._live.get(run_id)
            if live is not None:
                status, value = await asyncio.shield(live.done)
                if status == "succeeded":
                    return value
                if status in ("failed", "cancelled"):
                    raise value
            if self.store is None:
                known = self._memory_runs.get(run_id)
                if known is None:
                    raise RunNotFound(f"no run {run_id!r}")
                status, value, _ = known
                if status == "succeeded":
                    return value
                if status in ("failed", "cancelled"):
                    raise value
                continue
            rec = await self.get_run(run_id)
            if rec.status in TERMINAL:
                self._declare_for(rec)
                return recorded_outcome(run_id, rec.status, rec.result, rec.error)
            watcher = self._watchers.setdefault(run_id, asyncio.Event())
            watcher.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await watcher.wait()
            self._watchers.pop(run_id, None)  # no Event left behind per awaited run
            delay = min(delay * 2, self.poll_interval)

    async def _events(
        self, run_id: str, queue: asyncio.Queue[Any] | None = None
    ) -> AsyncIterator[Event]:
        if queue is None:  # else: registered before the run started (stream())
            queue = asyncio.Queue()
            self._listeners.setdefault(run_id, []).append(queue)
        live = self._live.get(run_id)
        if live is not None and queue not in live.execution.listeners:
            live.execution.listen(queue)
        finisher = asyncio.create_task(self._finish_event(run_id, queue))
        try:
            while True:
                event = await queue.get()
                yield event
                if isinstance(event, RunFinished):
                    return
        finally:
            finisher.cancel()
            listeners = self._listeners.get(run_id, [])
            if queue in listeners:
                listeners.remove(queue)
            if not listeners:
                self._listeners.pop(run_id, None)
            live = self._live.get(run_id)
            if live is not None:
                live.execution.unlisten(queue)

    async def _finish_event(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        """Close the stream of a run that finishes elsewhere (or already has)."""
        while True:
            if run_id not in self._live:
                try:
                    rec = await self.get_run(run_id)
                except RunNotFound:
                    rec = None
                if rec is not None and rec.status in TERMINAL:
                    queue.put_nowait(self._finished_event(rec))
                    return
            await asyncio.sleep(self.poll_interval)

    def _declare_for(self, rec: RunRecord) -> None:
        """Declare the types of the run's policy, if registered here, to read its result."""
        pol = self._policies.get(rec.policy)
        if pol is not None:
            pol.declare_types()

    def _finished_event(self, rec: RunRecord) -> RunFinished:
        self._declare_for(rec)
        value: Any = None
        err = None
        try:
            if rec.result:
                value = codec.loads(rec.result, f"result of run {rec.id!r}")
            if rec.error:
                e = error_from_json(rec.error, f"error of run {rec.id!r}")
                err = f"{type(e).__name__}: {e}"
        except CorruptedRecord as exc:
            err = f"CorruptedRecord: {exc}"
        return RunFinished(rec.id, rec.status, value, err)

    async def stream(
        self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any
    ) -> AsyncIterator[Event]:
        """Start a run and yield its events as they happen, ending with RunFinished."""
        run_id = _run_id(run_id)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        await self._start_listened(target, args, kwargs, run_id, queue)
        async for ev in self._events(run_id, queue):  # the same queue: nothing is lost
            yield ev

    # -- controlling -----------------------------------------------------------
    async def signal(self, run_id: str, name: str, payload: Any = None) -> None:
        """Deliver ``payload`` to the run's ``wait_for(name)``; queued if not waiting yet."""
        if self.store is None:
            live = self._live.get(run_id)
            if live is None:
                raise RunNotFound(f"no live run {run_id!r} in this runner")
            live.execution.deliver(name, payload)
            return
        await self.open()
        await self.store.send_signal(run_id, name, codec.dumps(payload, f"signal {name!r}"))
        if self._poke is not None:
            self._poke.set()

    async def cancel(self, run_id: str) -> None:
        """Cancel the run: at its next await here, within a heartbeat elsewhere."""
        live = self._live.get(run_id)
        if self.store is not None:
            await self.open()
            rec = await self.store.request_cancel(run_id)
            if rec is None:
                raise RunNotFound(f"no run {run_id!r}")
            watcher = self._watchers.get(run_id)
            if watcher is not None:
                watcher.set()
        elif live is None and run_id not in self._memory_runs:
            raise RunNotFound(f"no run {run_id!r}")
        if live is not None and live.task is not None:
            live.cancel_requested = True
            live.task.cancel()
            await asyncio.shield(live.done)  # set once the run has settled, never raises

    async def get_run(self, run_id: str) -> RunRecord:
        """The run's record: status, result or error, timestamps, holder."""
        if self.store is None:
            known = self._memory_runs.get(run_id)
            if known is None:
                raise RunNotFound(f"no run {run_id!r}")
            return RunRecord(run_id, "", known[2], status=known[0])  # type: ignore[arg-type]
        await self.open()
        rec = await self.store.get_run(run_id)
        if rec is None:
            raise RunNotFound(f"no run {run_id!r}")
        return rec

    async def steps(self, run_id: str) -> list[StepRecord]:
        """The run's recorded steps, in the order they finished."""
        if self.store is None:
            return []
        await self.get_run(run_id)
        steps = await self.store.load_steps(run_id)
        return sorted(steps.values(), key=lambda s: (s.finished_at, s.key))

    async def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunRecord]:
        if self.store is None:
            return [
                RunRecord(rid, "", inputs, status=st)  # type: ignore[arg-type]
                for rid, (st, _, inputs) in self._memory_runs.items()
                if status is None or st == status
            ][:limit]
        await self.open()
        return await self.store.list_runs(status, limit)

    async def prune(self, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete finished runs older than ``older_than`` seconds, or all but ``keep``."""
        if self.store is None:
            done = [rid for rid, v in self._memory_runs.items() if v[0] in TERMINAL]
            for rid in done:
                del self._memory_runs[rid]
            return len(done)
        await self.open()
        cutoff = None if older_than is None else time.time() - older_than
        return await self.store.prune(cutoff, keep)
