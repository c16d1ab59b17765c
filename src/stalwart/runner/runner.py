"""Runner: starts, awaits, resumes, signals, cancels and streams runs.

``Runner()`` keeps runs in memory; ``Runner("sqlite:///agents.db")`` makes
every run durable. Both take one path: a run is created in the store, claimed
(a lease with a fencing token), executed by the
:class:`~stalwart.runner.driver.Driver`, and its outcome written back. Over a
durable store a :class:`~stalwart.runner.worker.Worker` loop keeps the leases
and resumes the runs that wake (S7, S8).

Roles are explicit. A runner executes the runs it starts (and their
children), resuming them when they wake. It executes *other* runs only when
asked to: :meth:`Runner.serve` (a worker, as ``stalwart worker``),
:meth:`Runner.recover` (one pass, now), or ``Runner(url, recover=True)`` (a
worker in the background). A process that only enqueues, signals or inspects
never executes a run.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, overload

from ..core.context import SupportsPolicy
from ..core.errors import RunNotFound, StoreError
from ..core.events import Event, Hook
from ..core.ledger import RunRecord, StepRecord, check_delay, check_priority, check_run_id
from ..core.policy import Policy
from ..stores import open_store
from ..stores.base import Store, this_host
from .assembly import assemble
from .awaiting import await_outcome
from .batch import RunCall, enqueue_many
from .control import cancel_run, prune_runs, send_signal
from .enqueue import enqueue_run
from .handle import EventBuffer, RunHandle
from .identity import code_version
from .lifecycle import start_loop, stop_executing
from .memory_runs import forget_run, stop_with_caller
from .registry import Registry
from .schedules import ScheduleRecord
from .serving import serve
from .sync import run_blocking
from .threads import Thread, thread_policy

__all__ = ["RunCall", "RunHandle", "Runner"]

P = ParamSpec("P")
R = TypeVar("R")


def _run_id(run_id: str | None) -> str:
    """The id a run is started under: a random one, or the caller's, checked."""
    return uuid.uuid4().hex if run_id is None else check_run_id(run_id)


class Runner:
    """Runs policies: in memory by default, durably given a store URL.

    ``store``: None (``$STALWART_STORE`` if set, else memory), "memory",
    "sqlite:///path.db" (durability settings as
    query parameters, see the README), "postgresql://…", or a Store.
    ``hooks`` observe or veto calls; ``max_parallel`` caps concurrent option
    calls; ``lease`` is how long a claim on a run lasts without a heartbeat;
    ``poll_interval`` bounds how late a timer or a signal from another process
    is noticed; ``recover=True`` makes the runner a worker in the background:
    it also claims ready runs it did not start (abandoned, woken, enqueued).
    As a worker: ``queues`` it takes runs from (None: all), ``concurrency``
    (most runs it executes at once), ``shutdown_timeout`` (how long
    :meth:`serve` lets held runs finish on SIGTERM before handing them back).
    ``schedule_clock``: what time it is for :meth:`schedule` (``time.time``;
    tests pass one they control).
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
        recover: bool = False,
        code_version: str | None = None,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        shutdown_timeout: float = 30.0,
        schedule_clock: Callable[[], float] | None = None,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if store is None:  # as the CLI does: the environment names the store
            store = os.environ.get("STALWART_STORE") or None
        self.store: Store = open_store(store)
        self.hooks = tuple(hooks)
        self.max_parallel = max_parallel
        self.lease = lease
        self.poll_interval = poll_interval
        self.inline_sleep = inline_sleep
        self.code_version = code_version
        self.shutdown_timeout = shutdown_timeout
        self.owner = f"{this_host()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.registry = Registry()
        for p in policies:
            self.registry.register(p)
        (
            self._table,
            self._children,
            self._driver,
            self._worker,
            self._starter,
            self._streams,
            self._schedules,
        ) = assemble(
            self.store,
            self.registry,
            hooks=self.hooks,
            owner=self.owner,
            lease=lease,
            poll_interval=poll_interval,
            inline_sleep=inline_sleep,
            max_parallel=max_parallel,
            queues=queues,
            concurrency=concurrency,
            serving=recover,
            schedule_clock=schedule_clock,
            register=self.register,
            version=self._version,
            start_here=self._start_here,
            outcome=self.outcome,
            get_run=self.get_run,
        )
        self._opened = False
        self._closed = False
        self._bg: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------
    async def __aenter__(self) -> Runner:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        """Closed after use: awaiting through it would quietly reopen its store."""
        return self._closed

    @property
    def executing(self) -> list[str]:
        """Ids of the runs executing in this runner now."""
        return list(self._table.live)

    async def open(self) -> None:
        if self._opened:
            return
        self._opened = True
        self._closed = False
        self._bg = await start_loop(self.store, self._table, self._worker)

    async def close(self) -> None:
        """Stop the worker loop, give back runs still held, close the store."""
        loop, self._bg = self._bg, None
        try:
            await stop_executing(loop, self._table, self._driver)  # raises a loop's bug
        finally:
            if self._opened:
                await self.store.close()
            self._opened = False
            self._closed = not self.store.ephemeral  # in memory there is nothing to leak

    def register(self, target: Any) -> Policy[Any, Any]:
        """Make a policy known, so runs of it can be resumed by this runner.

        A run row names its policy; only registered policies answer to that
        name (S13), and one name means one policy: registering a different
        policy under a name that is taken raises :class:`DuplicatePolicy`.
        """
        return self.registry.register(target)

    def find_policy(self, name: str) -> Policy[Any, Any] | None:
        """The registered policy a run row names (its ``policy`` field), if
        this runner was given it; never an import (S13)."""
        return self.registry.find(name)

    def _version(self, pol: Policy[Any, Any]) -> str:
        return self.code_version if self.code_version is not None else code_version(pol)

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
        memory = self.store.ephemeral
        forget = run_id is None and memory
        run_id = _run_id(run_id)
        try:
            await self._start(target, args, kwargs, run_id, settle=False)
            return await self.outcome(run_id)
        except asyncio.CancelledError:
            if memory:  # in memory the run lives only for its caller
                await stop_with_caller(self._table, run_id)
            raise
        finally:
            if forget:
                forget_run(self.store, self._table, run_id)

    def run_sync(self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any) -> Any:
        """Run ``target`` from synchronous code (a script); closes the runner after."""
        return run_blocking(lambda: self.run(target, *args, run_id=run_id, **kwargs), self.close)

    async def start(
        self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any
    ) -> RunHandle:
        """Start a run and return its handle at once.

        ``run_id`` is an idempotency key: starting an id that exists returns
        that run, provided the policy and inputs are the same, and resumes it
        here if nobody holds it. The handle's :meth:`~RunHandle.events` yields
        every event from the run's start, even those that happened before it
        was called.
        """
        run_id = _run_id(run_id)
        queue: asyncio.Queue[Any] = EventBuffer()
        await self._start_listened(target, args, kwargs, run_id, queue)
        return RunHandle(self, run_id, queue)

    async def stream(
        self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any
    ) -> AsyncIterator[Event]:
        """Start a run and yield its events as they happen, ending with RunFinished."""
        run_id = _run_id(run_id)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        await self._start_listened(target, args, kwargs, run_id, queue)
        async for ev in self._streams.events(run_id, queue):  # the same queue: nothing lost
            yield ev

    async def _start_listened(
        self,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str,
        queue: asyncio.Queue[Any],
    ) -> None:
        """Start the run with ``queue`` listening from its very first event."""
        self._table.listen(run_id, queue)
        try:
            await self._start(target, args, kwargs, run_id)
        except BaseException:
            self._table.unlisten(run_id, queue)
            raise

    async def _start(
        self,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str,
        settle: bool = True,
    ) -> None:
        await self.open()
        await self._starter.start(target, args, kwargs, run_id, settle=settle)

    async def _start_here(
        self, rec: RunRecord, pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """Execute a child run of the memory store here (the child host's callback)."""
        await self._starter.start_child(rec, pol, args, kwargs)

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
        the start back. Enqueuing an id that exists returns that run. This
        runner does not execute it unless it serves that queue.
        """
        if self.store.ephemeral:
            raise StoreError("enqueue needs a durable store; in memory, use start()")
        priority, delay = check_priority(priority), check_delay(delay)
        await self.open()
        return await enqueue_run(
            self,
            target,
            args,
            kwargs,
            _run_id(run_id),
            queue=queue,
            priority=priority,
            delay=delay,
            version=self._version,
            wake=self._table.wake_worker,
        )

    async def enqueue_many(
        self,
        calls: Iterable[RunCall],
        *,
        queue: str = "default",
        priority: int = 0,
        delay: float | None = None,
    ) -> list[RunHandle]:
        """Put many runs on ``queue`` in one transaction: ``RunCall(policy,
        *args, run_id=..., **kwargs)`` each (see :mod:`stalwart.runner.batch`)."""
        return await enqueue_many(
            self, calls, queue=queue, priority=priority, delay=delay, wake=self._table.wake_worker
        )

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        """Limit a queue across all workers: concurrent runs, and starts per second."""
        if self.store.ephemeral:
            raise StoreError("queue limits need a durable store")
        await self.open()
        await self.store.set_queue(name, concurrency=concurrency, rate=rate)

    # -- schedules (logic in runner/schedules.py) -------------------------------
    async def schedule(
        self,
        target: Any,
        /,
        *,
        cron: str | None = None,
        every: timedelta | float | None = None,
        name: str | None = None,
        inputs: Mapping[str, Any] | None = None,
        queue: str = "default",
        priority: int = 0,
        timezone: str = "UTC",
        missed: str = "once",
        grace: timedelta | float = 60.0,
        **kwargs: Any,
    ) -> ScheduleRecord:
        """Start a run of ``target`` on every tick of ``cron`` (read in
        ``timezone``) or ``every`` (seconds or a timedelta), on ``queue``.

        The runs' arguments are ``inputs`` and ``kwargs`` (keywords only),
        checked against the policy's schema before anything is stored.
        Idempotent by ``name`` (the policy's name by default): the same
        definition again changes nothing (a paused schedule stays paused);
        another one replaces it, and moves its next tick only if the timing
        changed. Ticks run on runners that serve (:meth:`serve`, ``stalwart
        worker``, ``recover=True``) and have the policy. ``missed``: "once"
        runs one run for ticks no worker reached within ``grace`` seconds,
        "skip" runs none. See :mod:`stalwart.runner.schedules`.
        """
        if self.store.ephemeral:
            raise StoreError(
                "schedules need a durable store (nothing ticks in memory): "
                "Runner('sqlite:///path.db') or 'postgresql://...'"
            )
        pol = self.register(target)
        given = dict(inputs or {})
        both = sorted(set(given) & set(kwargs))
        if both:
            raise TypeError(f"schedule(): {', '.join(both)} given both in inputs= and as keywords")
        return await self._schedules.define(
            pol,
            name=name,
            cron=cron,
            every=every,
            timezone=timezone,
            missed=missed,
            grace=grace,
            queue=queue,
            priority=priority,
            inputs={**given, **kwargs},
            open_store=self.open,
        )

    async def schedules(self) -> list[ScheduleRecord]:
        """Every schedule of the store, by name."""
        await self.open()
        return await self.store.list_schedules()

    async def get_schedule(self, name: str) -> ScheduleRecord:
        """The schedule named ``name``, or :class:`ScheduleNotFound`."""
        await self.open()
        return await self._schedules.get(name)

    async def pause_schedule(self, name: str) -> ScheduleRecord:
        """Stop the schedule's ticks until :meth:`resume_schedule`."""
        await self.open()
        return await self._schedules.pause(name)

    async def resume_schedule(self, name: str) -> ScheduleRecord:
        """Tick again, from the next tick after now (ticks while paused do not run)."""
        await self.open()
        return await self._schedules.resume(name)

    async def delete_schedule(self, name: str, *, missing_ok: bool = False) -> bool:
        """Delete the schedule (the runs it started stay); whether it existed."""
        await self.open()
        return await self._schedules.delete(name, missing_ok)

    async def serve(self, stop: asyncio.Event | None = None) -> None:
        """Work as a worker until ``stop`` is set or SIGTERM/SIGINT arrives.

        Claims every ready run it has the policy for (from ``queues``), the
        runs of dead processes included. Then stops claiming, gives held
        runs ``shutdown_timeout`` seconds to finish, and hands the rest back
        to the store for another worker.
        """
        await serve(
            self._worker,
            stop,
            self.shutdown_timeout,
            open_runner=self.open,
            close_runner=self.close,
        )

    async def recover(self) -> list[RunHandle]:
        """Claim, once and now, every ready run this runner has the policy for
        (abandoned by a dead process, woken, or pending) and execute it here."""
        await self.open()
        if self.store.ephemeral:
            return []
        return [RunHandle(self, i) for i in await self._worker.claim_ready(everyone=True)]

    # -- awaiting ------------------------------------------------------------
    async def outcome(self, run_id: str) -> Any:
        """The run's result, or its error raised, waiting as long as needed
        (what :meth:`RunHandle.result` awaits)."""
        return await await_outcome(
            run_id,
            self._table,
            self.registry,
            self.get_run,
            ephemeral=self.store.ephemeral,
            poll_interval=self.poll_interval,
            store_url=str(self.store.describe().get("url", "")),
        )

    def events(self, run_id: str, queue: asyncio.Queue[Any] | None = None) -> AsyncIterator[Event]:
        """The events of run ``run_id`` from now on, ending with RunFinished.

        A run executing elsewhere shows only its end. ``queue`` is the buffer
        of a handle from :meth:`start`, listening since the run began.
        """
        return self._streams.events(run_id, queue)

    def unlisten(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        """Stop feeding ``queue`` the run's events (a handle let go of)."""
        self._table.unlisten(run_id, queue)

    # -- controlling -----------------------------------------------------------
    async def signal(self, run_id: str, name: str, payload: Any = None) -> None:
        """Deliver ``payload`` to the run's ``wait_for(name)``; queued if not waiting yet.

        Signalling never executes the run here: its own runner, or a worker,
        resumes it.
        """
        await self.open()
        await send_signal(self.store, self._table, run_id, name, payload)

    async def cancel(self, run_id: str) -> None:
        """Cancel the run: at its next await here, within a heartbeat elsewhere."""
        await self.open()
        await cancel_run(self.store, self._table, run_id)

    # -- conversations and turn queues (threads.py) ------------------------------
    def thread(
        self, agent: Any, thread_id: str, *, queue: str | None = None, **options: Any
    ) -> Thread:
        """A durable conversation with ``agent`` under ``thread_id``: ``await
        thread.send(message)`` returns the reply; the history lives in the
        ledger. ``options``: ``max_turns``, ``max_bytes``, ``carry_last`` (when
        and how much to carry into a fresh generation), ``followups``
        (``"queue"``, or ``"inject"`` at the agent's next model call), see
        :mod:`.threads`. ``queue``: this runner only enqueues the thread's
        run and its turns there, for a worker serving ``thread_policies(agent)``;
        None executes them here."""
        return Thread(self, thread_policy(agent, **options), thread_id, queue)

    async def send(
        self,
        thread_id: str,
        message: Any,
        *,
        agent: Any,
        message_id: str | None = None,
        queue: str | None = None,
    ) -> Any:
        """Send ``message`` to the conversation ``thread_id`` with ``agent``
        (started if new) and return the agent's reply to it."""
        thread = self.thread(agent, thread_id, queue=queue)
        return await thread.send(message, message_id=message_id)

    def turns(
        self,
        agent: Any,
        queue_id: str,
        *,
        parallel: int = 1,
        queue: str | None = None,
        **options: Any,
    ) -> Thread:
        """A turn queue for ``agent`` (no history): callers ``put`` turns, the
        agent takes them in order, ``parallel`` at a time, and each caller
        gets its own result (``await handle.result()``) or stream. ``queue``:
        as for :meth:`thread`."""
        loop = thread_policy(agent, history=False, parallel=parallel, **options)
        return Thread(self, loop, queue_id, queue)

    async def _claim_thread(
        self,
        rec: RunRecord,
        pol: Policy[Any, Any],
        call: tuple[tuple[Any, ...], dict[str, Any]] | None,
    ) -> None:
        """Execute a thread's run here unless it executes already (threads.py)."""
        self._worker.executor = not self.store.ephemeral
        self._table.mine.add(rec.id)
        if rec.id not in self._table.live:
            await self._starter.claim_here(rec, pol, call)

    # -- inspecting ------------------------------------------------------------
    async def get_run(self, run_id: str) -> RunRecord:
        """The run's record: status, result or error, timestamps, holder."""
        await self.open()
        rec = await self.store.get_run(run_id)
        if rec is None:
            raise RunNotFound(f"no run {run_id!r}")
        return rec

    async def steps(self, run_id: str) -> list[StepRecord]:
        """The run's recorded steps, in the order they finished (none in memory)."""
        await self.get_run(run_id)
        steps = await self.store.load_steps(run_id)
        return sorted(steps.values(), key=lambda s: (s.finished_at, s.key))

    async def list_runs(
        self, status: str | None = None, limit: int = 100, **filters: Any
    ) -> list[RunRecord]:
        """Runs newest first; ``filters`` as :meth:`Store.list_runs` takes them
        (``queue``, ``policy``, ``id_contains``, ``created_after``,
        ``created_before``, and ``before``, the cursor of the next page)."""
        await self.open()
        return await self.store.list_runs(status, limit, **filters)

    async def prune(self, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete finished runs older than ``older_than`` seconds, or all but ``keep``."""
        await self.open()
        return await prune_runs(self.store, self._table, older_than, keep)
