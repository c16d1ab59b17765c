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
:meth:`Runner.recover` (one pass, now), or ``Runner(url, serving=True)`` (a
worker in the background). A process that only enqueues, signals or inspects
never executes a run.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar, overload

from ..core import codec
from ..core.approval import APPROVAL_PREFIX, read_decisions, taken_key, wait_key, waiting_calls
from ..core.context import SupportsPolicy
from ..core.errors import (
    ApprovalError,
    CancelledRun,
    CorruptedRecord,
    RunNotFound,
    SignalRefused,
    StoreError,
)
from ..core.events import Event, Hook
from ..core.ledger import (
    RunRecord,
    StepRecord,
    asked_key,
    check_delay,
    check_priority,
    check_run_id,
)
from ..core.policy import Policy
from ..core.tags import check_tags
from ..stores import open_store
from ..stores.base import StepPage, StepPosition, Store, this_host
from .awaiting import Outcomes
from .batch import Enqueuer, RunCall
from .driver import Driver
from .handle import EventBuffer, RunHandle
from .leases import Leases
from .registry import Registry
from .routing import app_version
from .starting import Starter
from .table import RunTable, Settings
from .worker import Ticker, Worker

__all__ = ["RunCall", "RunHandle", "Runner"]

P = ParamSpec("P")
R = TypeVar("R")


def _tags(tags: Mapping[str, str] | None) -> dict[str, str] | None:
    """Checked tags (an error naming the bad one), or None for none."""
    return check_tags(tags) or None if tags is not None else None


def _run_id(run_id: str | None) -> str:
    """The id a run is started under: a random one, or the caller's, checked."""
    return uuid.uuid4().hex if run_id is None else check_run_id(run_id)


def _in_place(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[Any], Any]:
    """How ``run(..., in_place=True)`` writes a run's result into what it
    was given: the target says (a flow writes its store), checked before
    the run starts."""
    make = getattr(target, "__stalwart_in_place__", None)
    if make is None:
        raise TypeError(
            f"in_place=True is for flows (their shared store is updated in place); "
            f"{type(target).__name__} has no store to update"
        )
    update: Callable[[Any], Any] = make(args, kwargs)
    return update


class Runner:
    """Runs policies: in memory by default, durably given a store URL.

    ``store``: None (``$STALWART_STORE`` if set, else memory), "memory",
    "sqlite:///path.db" (durability settings as
    query parameters, see the README), "postgresql://…", or a Store.
    ``hooks`` observe or veto calls; ``max_parallel`` caps concurrent option
    calls; ``lease`` is how long a claim on a run lasts without a heartbeat;
    ``poll_interval`` bounds how late a timer or a signal from another process
    is noticed; ``serving=True`` makes the runner a worker in the background:
    it also claims ready runs it did not start (abandoned, woken, enqueued).
    As a worker: ``queues`` it takes runs from (None: all), ``concurrency``
    (most runs it executes at once), ``shutdown_timeout`` (how long
    :meth:`serve` lets held runs finish on SIGTERM before handing them back).
    ``adopt_abandoned=False``: starting a run does not make it take over the
    runs a dead process left running (S8); it still resumes its own and
    their children (``stalwart run`` uses it: a program resumes its flows
    only).
    ``tickers``: what its worker loop does on each pass while it serves
    (:class:`~stalwart.runner.Ticker`; :class:`stalwart.schedules.Schedules`
    made over the runner joins them).

    It is made of parts, built here in order, each given the objects it
    uses: the table of runs live here, the outcomes and event streams, the
    driver that executes a run (and hosts its child runs), the worker loop,
    the starter and the enqueuer.
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
        serving: bool = False,
        code_version: str | None = None,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        shutdown_timeout: float = 30.0,
        adopt_abandoned: bool = True,
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
        #: What the worker loop does on each pass while it serves (see Ticker).
        self.tickers: list[Ticker] = []
        self.settings = Settings(
            owner=self.owner,
            hooks=self.hooks,
            lease=lease,
            poll_interval=poll_interval,
            inline_sleep=inline_sleep,
            max_parallel=max_parallel,
            queues=None if queues is None else tuple(queues),
            concurrency=concurrency,
            code_version=code_version,
        )
        store, registry, settings = self.store, self.registry, self.settings
        self._table = table = RunTable(poll_interval)
        #: The ``uid`` of each signal delivered to a live run in memory.
        self._signal_uids: set[str] = set()
        self._outcomes = outcomes = Outcomes(store, table, registry)
        self._driver = driver = Driver(store, table, registry, outcomes, settings)
        self._worker = worker = Worker(
            store,
            table,
            registry,
            driver,
            settings,
            self.tickers,
            serving=serving,
            adopt=adopt_abandoned,
        )
        self._starter = Starter(store, table, registry, driver, worker, settings)
        self._enqueuer = Enqueuer(store, table, registry, settings)
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

    @property
    def leases(self) -> Leases:
        """How many leases this runner took, renewed and lost since it was
        made (:class:`~stalwart.runner.leases.Leases`; the metrics read it)."""
        return self._table.leases

    async def open(self) -> None:
        if self._opened:
            return
        self._opened = True
        self._closed = False
        await self.store.open()
        if not self.store.ephemeral:  # the worker loop keeps leases, wakes runs (S7, S8)
            self._table.poke = asyncio.Event()
            self._bg = asyncio.create_task(self._worker.loop(), name="stalwart-runner")

    async def close(self) -> None:
        """Stop the worker loop, give back runs still held, close the store.

        The loop stops first, then the runs executing here (their leases run
        out and another process resumes them), then the store closes; then
        the bug that ended the loop is raised, if one did (see
        :meth:`Worker.loop`)."""
        loop, self._bg = self._bg, None
        try:
            await self._stop_executing(loop)  # raises a loop's bug
        finally:
            if self._opened:
                await self._worker.stopped()  # a serving worker is no longer live
                await self.store.close()
            self._opened = False
            self._closed = not self.store.ephemeral  # in memory there is nothing to leak

    async def _stop_executing(self, loop: asyncio.Task[None] | None) -> None:
        """Stop the worker loop and every run executing here, and wait for them."""
        table = self._table
        if loop is not None:
            loop.cancel()
            await asyncio.wait([loop])  # its own error is raised below, after the cleanup
            if not loop.cancelled():
                loop.exception()  # retrieved: it is table.failed, raised below
        for live in list(table.live.values()):
            if live.task is not None and not live.task.done():
                live.task.cancel()
                await asyncio.wait([live.task])  # neither raises nor swallows our own cancel
        await self._driver.drain()
        if table.failed is not None:
            failed, table.failed = table.failed, None  # raised once, by the close that saw it
            raise failed

    @property
    def app_version(self) -> str:
        """This runner's application version: its ``code_version``, else a
        digest of its policies' names and code versions (:mod:`.routing`)."""
        reg = self.registry
        policies = {name: pol for name in reg.names if (pol := reg.find(name)) is not None}
        return app_version(self.code_version, policies, self.settings.version_of)

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

    # -- starting ------------------------------------------------------------
    @overload
    async def run(
        self,
        target: Policy[P, R],
        /,
        *args: Any,
        run_id: str | None = None,
        in_place: bool = False,
        tags: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> R: ...
    @overload
    async def run(
        self,
        target: SupportsPolicy[P, R],
        /,
        *args: Any,
        run_id: str | None = None,
        in_place: bool = False,
        tags: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> R: ...
    @overload
    async def run(
        self,
        target: Callable[..., Awaitable[R]],
        /,
        *args: Any,
        run_id: str | None = None,
        in_place: bool = False,
        tags: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> R: ...
    async def run(
        self,
        target: Any,
        /,
        *args: Any,
        run_id: str | None = None,
        in_place: bool = False,
        tags: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run ``target`` to the end and return its result (or raise its error).

        ``in_place=True``, for a flow (``run(flow, shared=store,
        in_place=True)``): the run's result, the store as the flow left it,
        is written into ``store`` itself, as PocketFlow's ``flow.run(store)``
        leaves it, and ``store`` is returned. A durable run records its
        inputs and works on its own copy, so without it only the returned
        store holds the results. A target that has no such store is refused
        (``TypeError``) before anything runs.

        ``tags``: the run's tags (``{"customer": "c-42"}``, see
        :func:`~stalwart.core.tags.check_tags`), as for :meth:`start`.
        """
        checked = _tags(tags)
        update = _in_place(target, args, kwargs) if in_place else None
        memory = self.store.ephemeral
        forget = run_id is None and memory
        run_id = _run_id(run_id)
        try:
            await self._start(target, args, kwargs, run_id, settle=False, tags=checked)
            result = await self.outcome(run_id)
            return result if update is None else update(result)
        except asyncio.CancelledError:
            if memory:  # in memory the run lives only for its caller: stop it
                live = self._table.live.get(run_id)
                if live is not None and live.task is not None:
                    live.cancel_requested = True
                    live.task.cancel()
                    await asyncio.wait([live.task])  # settled, its option calls cancelled
            raise
        finally:
            if forget:  # nobody can address it: forgotten, so a loop of run() keeps nothing
                self._forget(run_id)

    def _forget(self, run_id: str) -> None:
        """Drop a finished memory run and its children from the store and the table."""
        forget = getattr(self.store, "forget", None)
        gone = forget(run_id) if forget is not None else [run_id]
        for rid in gone:
            self._table.kept.pop(rid, None)
            self._table.calls.pop(rid, None)
            self._table.mine.discard(rid)

    def run_sync(
        self,
        target: Any,
        /,
        *args: Any,
        run_id: str | None = None,
        in_place: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``target`` from synchronous code (a script), in a new event
        loop; closes the runner after. Refused inside a running loop, where
        ``asyncio.run`` would fail with a message that does not say what to
        do instead. ``in_place`` as for :meth:`run`."""
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
                return await self.run(target, *args, run_id=run_id, in_place=in_place, **kwargs)
            finally:
                await self.close()

        return asyncio.run(main())

    async def start(
        self,
        target: Any,
        /,
        *args: Any,
        run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> RunHandle:
        """Start a run and return its handle at once.

        ``run_id`` is an idempotency key: starting an id that exists returns
        that run, provided the policy and inputs are the same, and resumes it
        here if nobody holds it. The handle's :meth:`~RunHandle.events` yields
        every event from the run's start, even those that happened before it
        was called.

        ``tags``: a few key-value strings to find the run by
        (``{"customer": "c-42"}``; :func:`~stalwart.core.tags.check_tags`
        says which), kept as the run is created: a run that exists keeps
        the tags it was created with.
        """
        checked = _tags(tags)
        run_id = _run_id(run_id)
        queue: asyncio.Queue[Any] = EventBuffer()
        await self._start_listened(target, args, kwargs, run_id, queue, checked)
        return RunHandle(self, run_id, queue)

    async def stream(
        self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any
    ) -> AsyncIterator[Event]:
        """Start a run and yield its events as they happen, ending with RunFinished."""
        run_id = _run_id(run_id)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        await self._start_listened(target, args, kwargs, run_id, queue)
        async for ev in self._outcomes.events(run_id, queue):  # the same queue: nothing lost
            yield ev

    async def _start_listened(
        self,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str,
        queue: asyncio.Queue[Any],
        tags: dict[str, str] | None = None,
    ) -> None:
        """Start the run with ``queue`` listening from its very first event."""
        self._table.listen(run_id, queue)
        try:
            await self._start(target, args, kwargs, run_id, tags=tags)
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
        tags: dict[str, str] | None = None,
    ) -> None:
        await self.open()
        await self._starter.start(target, args, kwargs, run_id, settle=settle, tags=tags)

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
        tags: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> RunHandle:
        """Put a run on ``queue`` for any worker to execute, and return its handle.

        Higher ``priority`` runs are claimed first; ``delay`` (seconds) holds
        the start back; ``tags`` as for :meth:`start`. Enqueuing an id that
        exists returns that run. This runner does not execute it unless it
        serves that queue.
        """
        if self.store.ephemeral:
            raise StoreError("enqueue needs a durable store; in memory, use start()")
        priority, delay = check_priority(priority), check_delay(delay)
        checked = _tags(tags)
        await self.open()
        run_id = _run_id(run_id)
        created = await self._enqueuer.one(
            target, args, kwargs, run_id, queue, priority, delay, checked
        )
        handle = RunHandle(self, run_id)
        handle.created = created
        return handle

    async def enqueue_many(
        self,
        calls: Iterable[RunCall],
        *,
        queue: str = "default",
        priority: int = 0,
        delay: float | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> list[RunHandle]:
        """Put many runs on ``queue`` in one transaction: ``RunCall(policy,
        *args, run_id=..., **kwargs)`` each (see :mod:`stalwart.runner.batch`).

        Every call is validated first, as ``enqueue`` does; each id names one
        run (S13): an id that exists, or appears twice in the batch, must be
        the same call, or :class:`~stalwart.InputMismatchError` is raised
        (the new runs beside it are enqueued; the corrected batch again
        returns the same runs). ``tags``: every run's tags, as for :meth:`start`."""
        if self.store.ephemeral:
            raise StoreError("enqueue needs a durable store; in memory, use start()")
        priority, delay = check_priority(priority), check_delay(delay)
        checked = _tags(tags)
        await self.open()
        ids = await self._enqueuer.many(calls, queue, priority, delay, checked)
        return [RunHandle(self, run_id) for run_id in ids]

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        """Limit a queue across all workers: concurrent runs, and starts per second."""
        if self.store.ephemeral:
            raise StoreError("queue limits need a durable store")
        await self.open()
        await self.store.set_queue(name, concurrency=concurrency, rate=rate)

    async def serve(self, stop: asyncio.Event | None = None) -> None:
        """Work as a worker until ``stop`` is set or SIGTERM/SIGINT arrives.

        Claims every ready run it has the policy for (from ``queues``), the
        runs of dead processes included. Then stops claiming, gives held
        runs ``shutdown_timeout`` seconds to finish, and hands the rest back
        to the store for another worker (S8). Not in the main thread, no
        signal handler can be installed: the caller sets ``stop``.
        """
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
            except (RuntimeError, ValueError, NotImplementedError):
                pass  # not the main thread: the caller sets ``stop``
        try:
            await self.open()
            await self._worker.serve(stop, self.shutdown_timeout)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            await self.close()
            self._worker.draining = False

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
        await self.open()
        return await self._outcomes.outcome(run_id)

    async def events(
        self, run_id: str, queue: asyncio.Queue[Any] | None = None
    ) -> AsyncIterator[Event]:
        """The events of run ``run_id`` from now on, ending with RunFinished.

        A run executing elsewhere shows only its end. ``queue`` is the buffer
        of a handle from :meth:`start`, listening since the run began.
        """
        await self.open()
        async for ev in self._outcomes.events(run_id, queue):
            yield ev

    def unlisten(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        """Stop feeding ``queue`` the run's events (a handle let go of)."""
        self._table.unlisten(run_id, queue)

    # -- acting on runs by id ------------------------------------------------------
    # None of these executes a run here (a process that only signals or
    # cancels stays a client); they change what the store says and wake
    # whoever executes the run: its own runner, or a worker within a
    # heartbeat (S9).
    async def signal(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        uid: str | None = None,
        wait_fence: int | None = None,
    ) -> None:
        """Deliver ``payload`` to the run's ``wait_for(name)``; queued if not waiting yet.

        ``uid`` names this send: sent again with the same ``uid`` (a retry
        after an unclear failure), it is delivered once; the retry does
        nothing, even if the run has gone on to wait for ``name`` again.

        ``wait_fence``: deliver only to the wait the caller saw open (the
        ``fence`` of the suspended run's record it read), else raise
        :class:`SignalRefused` and send nothing. Of two answers racing for
        one wait (two people, two clients), the first wakes the run and the
        second is refused, checked and sent in one transaction: never
        queued for the run's next wait of the same name. (A run waiting in
        this process's memory, without a durable store, takes it while any
        wait for ``name`` is open.)

        Signalling never executes the run here: its own runner, or a worker,
        resumes it. In memory the live run is handed it (waits there are inline).

        A tool approval's signal (``approval:<key>``, docs/approvals.md) is
        checked first: a decision that does not fit, or a second one for a
        wait (taken by the run or not: the store sends it ``once``), raises
        :class:`ApprovalError` naming the field, and nothing is queued.
        """
        await self.open()
        once = name.startswith(APPROVAL_PREFIX) and await self._check_approval(
            run_id, name, payload
        )
        try:
            if self.store.ephemeral:
                live = self._table.live.get(run_id)
                if live is None:
                    raise RunNotFound(f"no live run {run_id!r} in this runner")
                if uid is not None and uid in self._signal_uids:
                    return  # delivered already: this is a retry
                live.engine.waits.deliver(name, payload, once=once, waiting=wait_fence is not None)
                if uid is not None:
                    self._signal_uids.add(uid)
                return
            data = codec.dumps(payload, f"signal {name!r}")
            await self.store.send_signal(
                run_id, name, data, uid=uid, once=once, wait_fence=wait_fence
            )
        except SignalRefused:
            if not once:
                raise  # ``wait_fence``: the wait was answered, or is not open
            # A wait takes one decision: a second one sent before the run
            # took the first would never be read, so it is refused here,
            # where the store checks and sends in one transaction.
            where = f"tool approval of run {run_id!r}, signal {name!r}"
            raise ApprovalError(
                f"{where}: a decision was sent to this wait already; nothing was sent"
            ) from None
        self._table.wake_worker()

    async def _check_approval(self, run_id: str, name: str, payload: Any) -> bool:
        """Refuse a tool approval's decision that does not fit the wait;
        whether ``name`` is a tool approval's (so sent once)."""
        at = wait_key(name)
        if at is None:
            return False
        where = f"tool approval of run {run_id!r}, signal {name!r}"
        calls = None
        if not self.store.ephemeral:
            if await self.store.load_step(run_id, taken_key(at)) is not None:
                raise ApprovalError(f"{where}: this wait was decided already; nothing was sent")
            note = await self.store.load_step(run_id, asked_key(at))
            if note is not None and note.output is not None:
                try:
                    calls = waiting_calls(codec.loads(note.output, f"{where}: its note"))
                except CorruptedRecord:
                    calls = None  # the run reads the decision itself, and asks again if need be
        read_decisions(payload, calls, where)
        return True

    async def cancel(self, run_id: str) -> None:
        """Cancel the run: at its next await here, within a heartbeat elsewhere."""
        await self.open()
        table = self._table
        live = table.live.get(run_id)
        rec = await self.store.request_cancel(run_id)
        if rec is None:
            raise RunNotFound(f"no run {run_id!r}")
        if self.store.ephemeral and rec.status == "cancelled" and live is None:
            err = CancelledRun(f"run {run_id!r} was cancelled")
            table.kept.setdefault(run_id, ("cancelled", err))
        watcher = table.watchers.get(run_id)
        if watcher is not None:
            watcher.set()
        if live is not None and live.task is not None:
            live.cancel_requested = True
            live.task.cancel()
            await asyncio.shield(live.done)  # set once the run has settled, never raises

    # -- what packages above the runner build on (stalwart.conversations) -----
    def version_of(self, pol: Policy[Any, Any]) -> str:
        """The code version runs of ``pol`` are recorded with."""
        return self.settings.version_of(pol)

    async def execute_here(
        self,
        rec: RunRecord,
        pol: Policy[Any, Any],
        call: tuple[tuple[Any, ...], dict[str, Any]] | None,
    ) -> None:
        """Execute the stored run ``rec`` here unless it executes already (a
        conversation's run); ``call`` gives a memory run's arguments.

        Routed as a worker's claim is (:mod:`.routing`): a serving runner
        leaves a run its version cannot continue (another version's, or a
        new one while another version is the latest) to the workers that
        can, and awaits it like any other."""
        memory = self.store.ephemeral
        self._worker.executor = not memory
        self._table.mine.add(rec.id)
        if rec.id in self._table.live:
            return
        if not memory and not await self._worker.may_continue(rec):
            return  # its version's workers continue it
        await self._driver.claim_here(rec, pol, call)

    async def start_as(
        self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run_id: str
    ) -> None:
        """Start ``target`` under ``run_id`` as a package above the runner
        made it (a conversation's turn, ``<conversation>~turn-<id>``, which
        :meth:`start` refuses to users), and execute it here."""
        await self._start(target, args, kwargs, run_id)

    def listen(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        """Feed ``queue`` the run's events from now on, while it executes here."""
        self._table.listen(run_id, queue)

    # -- inspecting ------------------------------------------------------------
    async def get_run(self, run_id: str) -> RunRecord:
        """The run's record: status, result or error, timestamps, holder."""
        await self.open()
        rec = await self.store.get_run(run_id)
        if rec is None:
            raise RunNotFound(f"no run {run_id!r}")
        return rec

    async def steps(self, run_id: str) -> list[StepRecord]:
        """The run's recorded steps, in the order they finished (none in memory).

        Every one, whole: a model call's record holds its conversation so
        far, so a conversation of N turns reads O(N²) bytes. To show a run,
        read a page (:meth:`step_page`).
        """
        await self.get_run(run_id)
        steps = await self.store.load_steps(run_id)
        return sorted(steps.values(), key=lambda s: (s.finished_at, s.key))

    async def step_page(
        self,
        run_id: str,
        limit: int,
        *,
        before: StepPosition | None = None,
        after: StepPosition | None = None,
    ) -> StepPage:
        """At most ``limit`` of the run's recorded steps, in the order they
        finished: the latest, or those ``before`` or ``after`` a step's
        ``(finished_at, key)``; with how many the run has and how many come
        before (:meth:`Store.step_page`). A page costs its own records,
        whatever the run's length."""
        await self.get_run(run_id)
        return await self.store.step_page(run_id, limit, before=before, after=after)

    async def list_runs(
        self, status: str | None = None, limit: int = 100, **filters: Any
    ) -> list[RunRecord]:
        """Runs newest first; ``filters`` as :meth:`Store.list_runs` takes them
        (``queue``, ``policy``, ``id_contains``, ``created_after``,
        ``created_before``, ``tags``, ``text``, and ``before``, the cursor of
        the next page)."""
        await self.open()
        return await self.store.list_runs(status, limit, **filters)

    async def prune(
        self,
        older_than: float | None = None,
        keep: int | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> int:
        """Delete finished runs older than ``older_than`` seconds, or all but
        ``keep`` (S12), and the outcomes this process kept of them. With
        ``tags``, only runs that have every one of them (``keep`` counts
        among those)."""
        checked = _tags(tags)
        await self.open()
        table = self._table
        cutoff = None if older_than is None else time.time() - older_than
        if cutoff is None and keep is None and self.store.ephemeral:
            cutoff = time.time() + 1  # in memory, every finished run
        gone = await self.store.prune(cutoff, keep, tags=checked)
        if table.kept:
            present = {r.id for r in await self.store.get_runs(list(table.kept))}
            for run_id in [i for i in table.kept if i not in present]:
                del table.kept[run_id]
                table.calls.pop(run_id, None)
        return gone
