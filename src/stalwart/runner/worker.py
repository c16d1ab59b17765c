"""A durable runner's loop: heartbeats, wake-ups, and claiming ready runs.

One loop per runner over a durable store. It renews the leases of the runs
executing here (S8), stops at once the runs another worker took over or that
were asked to cancel (S8, S9), and claims runs that are ready: its own runs
whose timer, signal or children woke them (S7), always; and, only when the
runner serves (``serve()``, ``recover()``, ``Runner(serving=True)``), any
ready run it has the policy for, including those a dead process left,
that its version can continue (:mod:`.routing`: runs are pinned to the code
version they started on; new runs go to the latest version).

Wake-ups from other processes come from the store (:meth:`Store.watch`:
LISTEN/NOTIFY on PostgreSQL, a short adaptive poll on SQLite), so a run
enqueued or signalled elsewhere starts within milliseconds, and a version
named the latest or retired elsewhere is learned at once; the loop still
polls every ``poll_interval``, and that is what it falls back on when the
store cannot tell it (a dropped listening connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

from ..core.errors import StoreError, StoreUnavailable
from ..core.ledger import TERMINAL, RunRecord
from ..core.policy import Policy
from ..stores.base import Store, owner_is_dead
from ..stores.versions import WorkerRecord
from . import observe
from .driver import Driver
from .registry import Registry
from .routing import Routing, fleet_of
from .table import RunTable, Settings

__all__ = ["Ticker", "Worker"]


class Ticker(Protocol):
    """Work a serving runner's worker loop does on each pass, before it claims
    (a package above the runner joins ``Runner.tickers``, as
    :class:`stalwart.schedules.Schedules` does): ``tick`` returns the ids of
    the runs it created, which the loop then claims like any other."""

    async def tick(self) -> Sequence[str]: ...


_log = observe.log

#: Most runs claimed in one query: a worker with room for many takes them in
#: batches, so one turn never holds the store for long.
CLAIM_BATCH = 64

#: The shortest pause after a pass that claimed nothing before the next one,
#: however often the loop is woken: a flood of wake-ups (a producer's burst,
#: or anyone who can NOTIFY the store's channels) costs at most one pass per
#: pause, never a spin.
QUIET = 0.002

#: How often, at most, a serving worker with room looks for pending runs of
#: policies it was not given (the store leaves them out of its claims), and
#: how many of the newest it looks at: enough to name a missing policy.
LOOK_EVERY = 60.0
LOOK_AT = 50


class Worker:
    """Claims and keeps runs for one runner (its ``owner`` in the store)."""

    def __init__(
        self,
        store: Store,
        table: RunTable,
        registry: Registry,
        driver: Driver,
        settings: Settings,
        tickers: Sequence[Ticker],
        *,
        serving: bool,
        adopt: bool = True,
    ) -> None:
        self.store = store
        self.settings = settings
        self.table = table
        self.registry = registry
        self.driver = driver
        self.owner = settings.owner
        self.lease = settings.lease
        self.poll_interval = settings.poll_interval
        self.queues = None if settings.queues is None else tuple(settings.queues)
        self.concurrency = settings.concurrency
        #: Claims any ready run it has the policy for, not only its own.
        self.serving = serving
        #: Executes runs (it has started one): also takes over the runs a
        #: dead process left running, as the next runner on a store does (S8).
        self.executor = False
        #: Whether an executor takes over those runs (a program run by
        #: `stalwart run` resumes only its own: another program's abandoned
        #: flow may bear the same name).
        self.adopt = adopt
        #: Shutting down: claim nothing more.
        self.draining = False
        #: A wake-up asked for a heartbeat now (a cancel request elsewhere).
        self._beat_now = False
        #: The store stopped telling us of changes: we poll only.
        self._deaf = False
        #: Awaited outcomes to look at again (a run settled elsewhere).
        self._recheck = False
        self._checking: asyncio.Task[None] | None = None
        #: Its runner's tickers, ticked while it serves (the runner's own list:
        #: a ticker made over the runner later joins it).
        self.tickers = tickers
        #: When it may next look for runs of policies it lacks (monotonic).
        self._next_look = 0.0
        #: What serve() waits for, while it serves: set when the loop fails.
        self._stop: asyncio.Event | None = None
        #: Its version, the latest, whether its own is retired (see .routing).
        self.routing = Routing()
        self._started_at = time.time()

    async def loop(self) -> None:
        """Heartbeats, timers, signals from elsewhere, and recovery, in one loop.

        It outlives what the store does (an outage is waited out, a refused
        pass is logged and tried again) but not its own bugs: any other
        exception is logged as one, ends the loop, and fails the runner
        loudly (:meth:`RunTable.loop_failed`: awaiting callers and
        ``serve()`` are told, and closing the runner raises it), where
        carrying on would leave runs that never start and nobody told.
        """
        try:
            await self._loop()
        except Exception as exc:
            _log.critical(
                "stalwart runner %s: the worker loop stopped on a bug (%s: %s); "
                "this runner claims, resumes and heartbeats nothing more",
                self.owner,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
            self.table.loop_failed(exc)
            if self._stop is not None:
                self._stop.set()  # serve() returns, and its close raises the bug
            raise
        finally:
            for task in (self._checking, self.table.watching):
                if task is not None and not task.done():
                    task.cancel()
                    await asyncio.wait([task])
            self.table.watching = None

    def _listen_if_needed(self) -> None:
        """Start taking the store's wake-ups once anything here waits for
        other processes (it serves, executes runs, or awaits an outcome): a
        process that only enqueues or inspects never holds a listening
        connection."""
        table = self.table
        if table.watching is None and (
            self.serving or self.executor or table.mine or table.watchers
        ):
            table.watching = asyncio.get_running_loop().create_task(
                self._watch(), name="stalwart-wakeups"
            )

    async def _loop(self) -> None:
        poke = self.table.poke
        assert poke is not None
        next_beat = 0.0
        down = False
        while True:
            self._listen_if_needed()
            poke.clear()  # before the pass: a wake-up during it means another pass
            claimed: list[str] = []
            try:
                now = time.time()
                if now >= next_beat or self._beat_now:
                    self._beat_now = False
                    await self.beat()
                    next_beat = now + self.lease / 3
                if self.serving and not self.draining:
                    for ticker in self.tickers:
                        if await ticker.tick():  # due ticks become runs, claimed below
                            self.table.wake_worker()
                claimed = await self.claim_ready(everyone=self.serving)
                _slow("heartbeat and claims", time.time() - now)
                if self.serving and self._room() > 0:  # after the claims: never delays one
                    await self._look_for_missing_policies()
                delay = min(self.poll_interval, max(0.0, next_beat - time.time()))
                wake = await self.store.next_wake()
                if wake is not None and (wake > time.time() or claimed):
                    # A wake time already past that we did not claim belongs to
                    # a run we cannot take (other queue, unknown policy, no
                    # room): waiting for it would spin; poll instead.
                    delay = min(delay, max(0.0, wake - time.time()))
                if down:
                    down = False
                    self.table.store_unavailable(None)
                    observe.emit(logging.INFO, "store.available", "the store answers again")
            except StoreUnavailable as exc:
                delay = self.poll_interval  # the store is down; try again later
                self.table.store_unavailable(exc)
                if not down:  # once per outage, not once per poll
                    down = True
                    observe.emit(
                        logging.WARNING,
                        "store.unavailable",
                        "the store is unavailable (%s); retrying every %.2f s",
                        exc,
                        delay,
                    )
            except StoreError as exc:  # a bad row: never stops heartbeats and recovery
                observe.emit(
                    logging.ERROR,
                    "store.refused",
                    "the store refused the worker loop's pass (%s); trying again in %.2f s",
                    exc,
                    self.poll_interval,
                )
                delay = self.poll_interval
            # Anything else is a bug in this loop or in what it calls, not a
            # state of the world to wait out: it ends the loop (see loop()).
            if not claimed and delay > 0:
                await asyncio.sleep(min(QUIET, delay))  # see QUIET
                delay = max(0.0, delay - QUIET)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await poke.wait()

    # -- wake-ups from other processes ------------------------------------------
    async def _watch(self) -> None:
        """The store's wake-ups, for as long as the loop runs; a store that
        has none (or fails) leaves the loop polling, as it always does."""
        try:
            await self.store.watch(self._woken)
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.exception("stalwart runner %s: wake-ups stopped; polling only", self.owner)

    def _woken(self, kind: str, detail: str | None) -> None:
        """What the store's watch reports (see :meth:`Store.watch`): a hint
        to look at the store now, never a fact acted on as such. Called for
        each notification; everything here is a flag or an event set, so a
        burst of them costs one pass of the loop."""
        if kind == "lost":
            if not self._deaf:  # once per outage
                self._deaf = True
                observe.emit(
                    logging.WARNING,
                    "store.wakeups_lost",
                    "wake-ups from other processes stopped (%s); polling every %.2f s "
                    "until they resume",
                    detail,
                    self.poll_interval,
                )
            return
        if self._deaf:
            self._deaf = False
            observe.emit(logging.INFO, "store.wakeups", "wake-ups from other processes resume")
        table = self.table
        if kind in ("settled", "cancel", "any") and table.watchers:
            self._check_awaited()
        if kind == "cancel" and table.live:
            self._beat_now = True  # the holder stops now, not at its next heartbeat
            table.wake_worker()
        if kind in ("ready", "any") and self._may_claim(detail):
            table.wake_worker()
        if kind == "versions" and self.serving and self.routing.kept:
            # A latest named or a version retired elsewhere: learned at a beat
            # now, not one heartbeat late (a worker of the old latest would
            # start new runs meanwhile, or a retired one take more).
            self._beat_now = True
            table.wake_worker()

    def _may_claim(self, queue: str | None) -> bool:
        """Whether a run made ready in ``queue`` (None or "": any) could be
        ours to claim. The payload is only compared with our own names."""
        if self.table.mine:
            return True  # our own runs wake in whatever queue they are
        if not self.serving:
            return False  # it takes nobody else's ready runs
        return not queue or self.queues is None or queue in self.queues

    def _check_awaited(self) -> None:
        """Look at the runs awaited here that execute elsewhere, in one
        query however many wait (wake-ups arriving meanwhile add one more)."""
        self._recheck = True
        if self._checking is None or self._checking.done():
            self._checking = asyncio.get_running_loop().create_task(self._settle_awaited())

    async def _settle_awaited(self) -> None:
        table = self.table
        first = True
        while self._recheck:
            if not first:  # runs settling back to back: one look per QUIET at most
                await asyncio.sleep(QUIET)
            first = False
            self._recheck = False
            ids = [i for i in table.watchers if i not in table.live]
            if not ids:
                return
            try:
                found = await self.store.get_runs(ids)
            except StoreError:
                return  # each awaiter reads the store itself at its next poll
            for rec in found:
                watcher = table.watchers.get(rec.id)
                if watcher is not None and rec.status in TERMINAL:
                    watcher.set()

    async def beat(self) -> None:
        """Extend our leases; stop the runs asked to cancel, and at once the
        runs another worker has taken over (S8: a replaced worker stops)."""
        held = list(self.table.live)
        beat = await self.store.heartbeat(self.owner, self.lease, held)
        self.table.leases.renewed += len(set(held).difference(beat.lost))
        if self.serving and self.routing.kept and await self._register():
            self._next_look = 0.0  # the versions changed: look for stranded runs now
        for run_id in beat.lost:
            live = self.table.live.get(run_id)
            if live is not None and live.task is not None and not live.task.done():
                observe.emit(
                    logging.WARNING,
                    "run.lease_lost",
                    "run %r: its lease was lost, another worker took it over; stopping here",
                    run_id,
                    run_id=run_id,
                    owner=self.owner,
                )
                live.lost = True
                live.task.cancel()
        for run_id in beat.cancel:
            live = self.table.live.get(run_id)
            if live is not None and live.task is not None and not live.lost:
                live.cancel_requested = True
                live.task.cancel()

    def _policies(self) -> dict[str, Policy[Any, Any]]:
        reg = self.registry
        return {name: pol for name in reg.names if (pol := reg.find(name)) is not None}

    async def _know_versions(self) -> None:
        """Before a claim of everyone's runs outside the loop (``recover()``
        ahead of the first beat, or a runner that does not serve): learn the
        versions, writing nothing."""
        policies = self._policies()
        self.routing.know(self.settings.code_version, policies, self.settings.version_of)
        try:
            self.routing.learn(await self.store.list_versions())
        except NotImplementedError:
            self.routing.kept = False

    async def _register(self) -> bool:
        """Record this worker in the store (its version, its policies' code
        versions, its queues) and learn the versions the store knows;
        whether they changed since the last beat."""
        policies = self._policies()
        of = self.settings.version_of
        self.routing.know(self.settings.code_version, policies, of)
        me = WorkerRecord(
            self.owner,
            self.routing.version,
            {name: of(pol) for name, pol in policies.items()},
            self.queues,
            self.lease,
            self._started_at,
            time.time(),
        )
        try:
            return self.routing.learn(await self.store.beat_worker(me))
        except NotImplementedError:  # a store that keeps no versions: no routing
            self.routing.kept = False
            return False

    async def stopped(self) -> None:
        """Say in the store that this worker no longer serves."""
        if self.routing.kept and self.routing.version:
            with contextlib.suppress(StoreError, NotImplementedError):
                await self.store.forget_worker(self.owner)

    async def claim_ready(self, everyone: bool) -> list[str]:
        """Claim and launch ready runs until none is left or there is no room.

        What it takes depends on the runner's role: with ``everyone`` (it
        serves), any ready run it has the policy for; else its own runs
        (started or spawned here) that woke, and, once it executes runs at
        all, the runs a dead process left running (S8). A runner that only
        enqueues, signals or inspects takes nothing.
        """
        if not (everyone or self.executor or self.table.mine):
            return []
        if everyone and self.routing.kept and not self.routing.version:
            await self._know_versions()
        async with self.table.claims():  # recover(), start() and this loop, one at a time
            claimed, crowded = await self._claim_due(everyone)
            if crowded and self.table.mine:
                claimed += await self._claim_own()
        return claimed

    def _room(self) -> int:
        if self.draining:
            return 0
        if self.concurrency is None:
            return CLAIM_BATCH
        return min(CLAIM_BATCH, self.concurrency - len(self.table.live))

    async def _claim_own(self) -> list[str]:
        """This runner's runs that are ready again, found by id: asked only
        when other runs crowded the ready list, so a store full of them can
        never starve a run of ours, and a poll costs one query, not a read of
        every run we wait for."""
        table = self.table
        ids = [i for i in table.mine if i not in table.live and i not in table.claiming]
        if not ids:
            return []
        now = time.time()
        found = {rec.id: rec for rec in await self.store.get_runs(ids)}
        claimed: list[str] = []
        for run_id in ids:
            rec = found.get(run_id)
            if rec is None or rec.status in TERMINAL:
                table.mine.discard(run_id)  # pruned, or finished elsewhere (a cancel)
                continue
            if self._room() <= 0:
                break
            if not _ready(rec, now, self.owner) or not self._acceptable(rec):
                continue
            pol = self.registry.find(rec.policy)
            assert pol is not None  # _acceptable asked the registry, which forgets no policy
            got = await self.store.claim(run_id, self.owner, self.lease)
            if got is not None:
                mine_now = self.settings.version_of(pol)
                if got.code_version != mine_now or got.cleared is not None:
                    got = await self._pin(got, mine_now)  # as in _claim_due
                self.driver.launch(got, pol, prior=rec)
                claimed.append(run_id)
        return claimed

    async def _claim_due(self, everyone: bool) -> tuple[list[str], bool]:
        """Claim from the store's ready runs; also whether runs this role may
        not take filled the list (then ours may be behind them)."""
        prior: dict[str, RunRecord] = {}  # as each run stood before its claim, for the log
        refused = 0
        mine = self.table.mine

        def accept(rec: RunRecord) -> bool:
            nonlocal refused
            adopted = self.executor and self.adopt and rec.status == "running"
            if not (everyone or rec.id in mine or adopted):
                refused += 1
                return False
            ok = self._acceptable(rec)
            if ok:
                prior[rec.id] = rec
            return ok

        claimed: list[str] = []
        queues = self.queues if everyone else None
        versions, fresh = self._routes() if everyone else (None, True)
        crowded = False
        while (room := self._room()) > 0:
            refused = 0
            batch = await self.store.claim_due(
                self.owner,
                self.lease,
                room,
                accept,
                queues,
                policies=self.registry.names,
                versions=versions,
                fresh=fresh,
            )
            crowded = crowded or refused >= room
            for rec in batch:
                # The store returns only runs accept() took, after it asked the
                # registry, which forgets no policy.
                pol = self.registry.find(rec.policy)
                assert pol is not None
                mine_now = self.settings.version_of(pol)
                # Started elsewhere, or cleared: the steps recorded from now on
                # are this code's, which no clearance (a verdict on the steps
                # recorded so far) covers. A single version never writes this.
                if rec.code_version != mine_now or rec.cleared is not None:
                    rec = await self._pin(rec, mine_now)
                self.driver.launch(rec, pol, prior=prior.get(rec.id))
                claimed.append(rec.id)
            if len(batch) < room:
                break  # nothing more is ready; a full batch may have more behind it
        if everyone and self.queues is not None:
            crowded = True  # our own runs may sit in queues we do not serve
        return claimed, crowded

    def _routes(self) -> tuple[frozenset[str] | None, bool]:
        """The code versions this worker continues and whether it starts new
        runs, for the claim to leave the others out before it reads its few
        (accept() still decides): None while it routes by none."""
        routing = self.routing
        if not routing.version:
            return None, True
        return routing.codes, routing.latest is None or routing.latest == routing.version

    async def _pin(self, rec: RunRecord, code_version: str) -> RunRecord:
        """Record that ``rec``, just claimed, continues under ``code_version``
        and drop its clearances: a later claim then pins it to the code that
        recorded its new steps. Only when a run crosses versions or was
        cleared; a single version never writes this."""
        if not self.routing.kept:
            return rec
        try:
            pinned = await self.store.pin_run(rec.id, code_version, fence=rec.fence)
        except NotImplementedError:
            return rec
        return rec if pinned is None else pinned

    async def _look_for_stranded(self) -> None:
        """Log the runs no live worker can continue (:mod:`.routing`), each
        once: part of the look below, once a minute while there is room."""
        fleet = await fleet_of(self.store)
        if fleet is None or not self.routing.kept:
            return
        found: dict[str, str] = {}
        for status in ("pending", "suspended", "running"):
            for rec in await self.store.list_runs(status=status, limit=LOOK_AT):
                why = fleet.stranded(rec)
                if why is not None:
                    found[rec.id] = why
        self.routing.say_stranded(found)

    async def _look_for_missing_policies(self) -> None:
        """Say which pending runs need a policy this runner was not given
        (:meth:`Registry.can_run` warns once per name). The store leaves
        such runs out of claims, so ``accept`` never sees them; without
        this look, a worker started without a policy (code that dropped
        it, a missing ``--app``) would leave its runs waiting in silence.
        One read of the newest pending runs a minute, and only while the
        worker has room: a busy worker pays nothing."""
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + LOOK_EVERY
        for rec in await self.store.list_runs(status="pending", limit=LOOK_AT):
            if self.queues is None or rec.queue in self.queues:
                self.registry.can_run(rec)
        await self._look_for_stranded()

    async def serve(self, stop: asyncio.Event, shutdown_timeout: float) -> None:
        """Serve until ``stop``; then claim nothing more and give held runs
        ``shutdown_timeout`` seconds to finish (the rest are handed back by
        the runner's close)."""
        serving = self.serving
        self.serving = True
        self._stop = stop
        try:
            if self.table.failed is not None:
                return  # the loop is gone: closing the runner raises its bug
            self.table.wake_worker()
            await stop.wait()
            self.draining = True
            tasks = [lv.task for lv in self.table.live.values() if lv.task is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=shutdown_timeout)
        finally:
            self.serving = serving
            self._stop = None
            if not serving:
                await self.stopped()  # a Runner(serving=True) says so when it closes

    async def may_continue(self, rec: RunRecord) -> bool:
        """Whether routing lets this runner continue ``rec``, a run it did not
        create (started again by id): a serving runner learns the versions
        first if it has not beat yet; one that does not serve routes by none."""
        if self.serving and self.routing.kept and not self.routing.version:
            await self._know_versions()
        return self.routes_here(rec)

    def routes_here(self, rec: RunRecord) -> bool:
        """Whether routing lets this worker continue ``rec`` (always, while
        it routes by no version: it has not registered as a serving worker)."""
        routing = self.routing
        if not routing.version:
            return True
        pol = self.registry.find(rec.policy)
        return pol is not None and routing.can_take(rec, self.settings.version_of(pol))

    def _acceptable(self, rec: RunRecord) -> bool:
        if rec.id in self.table.live or rec.id in self.table.claiming:
            return False
        retry = self.table.retry_after.get(rec.id)
        if retry is not None and time.monotonic() < retry[0]:
            return False
        if not self.registry.can_run(rec):
            return False
        # Not a registered worker: no versions to route by. A retired one
        # takes nothing, its own runs included (those it holds finish).
        return self.routes_here(rec)


def _slow(what: str, seconds: float) -> None:
    """Warn when the store took long enough that leases start to run short."""
    if seconds > observe.SLOW_STORE:
        observe.emit(
            logging.WARNING,
            "store.slow",
            "the store is slow: %s took %.2f s",
            what,
            seconds,
            seconds=seconds,
        )


def _ready(rec: RunRecord, now: float, owner: str) -> bool:
    """Whether a claim of ``rec`` could succeed now (the store decides for sure)."""
    if rec.cancel_requested:
        return False
    if rec.status == "pending":
        return rec.wake_at is None or rec.wake_at <= now
    if rec.status == "suspended":
        return rec.wake_at is not None and rec.wake_at <= now
    # Running: abandoned by a dead holder, by a lapsed lease, or by this
    # runner itself (dropped when the store was down; it is not live here).
    return rec.owner == owner or (rec.lease_expires_at or 0) < now or owner_is_dead(rec.owner)
