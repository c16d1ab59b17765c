"""Recurring schedules: a policy started on a timetable, once per tick, across all workers.

``Schedules(runner).define(report, cron="0 2 * * *", timezone="Europe/Paris")``
keeps a row in the store (:class:`~stalwart.stores.base.ScheduleRecord`): the
policy by its registered name, the runs' inputs, the timing, the next tick, a
paused flag. Nothing else: no module path, no code (S13). A runner with
schedules over it (``Schedules(runner)``, as ``stalwart worker`` makes) looks
for due schedules in its worker loop while it serves (``serve()``,
``Runner(serving=True)``): :meth:`Schedules.tick`, a
:class:`~stalwart.runner.Ticker` of the runner, starts their runs.

Exactly one run per tick, however many workers look:

* the tick's run id is derived from the schedule's name and the tick's time
  (``nightly@2026-03-01T01:00:00Z``, :func:`tick_run_id`), and creating a run
  is idempotent by id, so two workers racing on one tick make one run;
* the run is created *before* the next tick is recorded, and moving the next
  tick is a compare-and-set (:meth:`~stalwart.stores.base.Store.advance_schedule`):
  a worker killed in between leaves the tick due, and whoever takes it next
  finds the run already there.

Ticks no worker reached in time (every worker was down) follow the
schedule's ``missed`` policy. A tick counts as missed when it is more than
``grace`` seconds late. ``"once"``: one run for all the missed ticks (the
latest of them); ``"skip"``: no run for them, the schedule waits for its next
future tick. A tick that is on time always runs; ticks before it that were
missed are folded into it under either policy.

Intervals (``every=``) are whole seconds aligned to the Unix epoch, so
``every=timedelta(minutes=15)`` ticks at :00, :15, :30, :45 (UTC); a cron
expression (five fields, or six with seconds first; parsed by ``cronsim``)
is read in the schedule's ``timezone``, with the daylight-saving rules of
Debian's cron.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..core.errors import (
    ArgumentError,
    ScheduleError,
    ScheduleNotFound,
    StoreError,
    StoreUnavailable,
)
from ..core.ledger import RunRecord, check_priority
from ..core.redact import mask_url
from ..core.tags import check_tags, encode_tags
from ..runner import Runner, observe
from ..runner.inputs import read_inputs, run_inputs
from ..runner.observe import started, trace_for
from ..stores.base import ScheduleRecord, check_schedule
from .timing import (
    DUE_BATCH,
    MISSED,
    TIMING_FIELDS,
    Timing,
    check_name,
    check_seconds,
    differences,
    plan,
    tick_run_id,
)

__all__ = ["Schedules"]


class Schedules:
    """The schedules of ``runner``'s store: defined, listed, paused, and
    ticked by the runner's worker loop while it serves.

    Made once per runner: it joins the runner's tickers (its worker loop
    calls :meth:`tick`). ``clock`` is what time it is for schedules (seconds
    since the epoch): ``time.time`` unless a test controls it. The store is
    asked at most once per the runner's ``poll_interval``.
    """

    def __init__(self, runner: Runner, *, clock: Callable[[], float] | None = None) -> None:
        self.runner = runner
        self.store = runner.store
        self.clock: Callable[[], float] = clock or time.time
        self.interval = runner.poll_interval
        self._next_check = 0.0
        # Where the last poll's page of due schedules ended, when it was full:
        # the next poll reads the page after it.
        self._after: tuple[Any, str] | None = None
        # What was last logged about a schedule that could not tick, so a
        # trouble that lasts is logged once, not once per poll.
        self._trouble: dict[str, str] = {}
        runner.tickers.append(self)

    # -- defining ----------------------------------------------------------------
    async def define(
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
        tags: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> ScheduleRecord:
        """Start a run of ``target`` on every tick of ``cron`` (read in
        ``timezone``) or ``every`` (seconds or a timedelta), on ``queue``.

        The runs' arguments are ``inputs`` and ``kwargs`` (keywords only),
        checked against the policy's schema before anything is stored.
        Idempotent by ``name`` (the policy's name by default): the same
        definition again changes nothing (a paused schedule stays paused);
        another one replaces it, and moves its next tick only if the timing
        changed. Ticks run on runners that serve (``serve()``, ``stalwart
        worker``, ``Runner(serving=True)``), have schedules over them and have
        the policy. ``missed``: "once" runs one run for ticks no worker
        reached within ``grace`` seconds, "skip" runs none. ``tags``: the
        tags of every run it starts (see :meth:`~stalwart.Runner.start`).
        """
        runner = self.runner
        if self.store.ephemeral:
            raise StoreError(
                "schedules need a durable store (nothing ticks in memory): "
                "Runner('sqlite:///path.db') or 'postgresql://...'"
            )
        pol = runner.register(target)
        given = dict(inputs or {})
        both = sorted(set(given) & set(kwargs))
        if both:
            raise TypeError(f"schedule(): {', '.join(both)} given both in inputs= and as keywords")
        given.update(kwargs)
        name = check_name(pol.name if name is None else name)
        timing = Timing.of(name, cron, every, timezone)
        if missed not in MISSED:
            raise ScheduleError(
                f"schedule {name!r}: missed must be 'once' (one run for all missed ticks) "
                f"or 'skip' (none), not {missed!r}"
            )
        try:
            tag_text = encode_tags(check_tags(tags)) if tags is not None else None
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"schedule {name!r}: {exc}") from None
        grace_s = check_seconds(grace, "grace", name)
        if grace_s < 0:
            raise ScheduleError(f"schedule {name!r}: grace cannot be negative ({grace_s:g})")
        if not isinstance(queue, str) or not queue:
            raise ScheduleError(f"schedule {name!r}: queue is a queue's name, not {queue!r}")
        try:
            check_priority(priority)  # the rule every run's priority follows
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"schedule {name!r}: {exc}") from None
        try:
            valid = pol.validate(given)
        except ArgumentError as exc:
            raise ArgumentError(f"schedule {name!r}: {exc}") from None
        values = {k: valid.get(k, v) for k, v in given.items()}
        recorded = run_inputs(pol, f"{name}@(schedule)", (), values)
        next_at = timing.following(math.floor(self.clock()))
        try:
            tick_run_id(name, next_at)
        except (OverflowError, ValueError, OSError):
            raise ScheduleError(
                f"schedule {name!r}: every={timing.every} puts its first tick past the year "
                "9999, where no tick could be named"
            ) from None
        rec = ScheduleRecord(
            name=name,
            policy=pol.name,
            inputs=recorded,
            cron=timing.cron,
            every=timing.every,
            timezone=timing.timezone,
            missed=missed,
            grace=grace_s,
            queue=queue,
            priority=priority,
            next_at=next_at,
            tags=tag_text,
        )
        await runner.open()
        stored, created = await self.store.create_schedule(rec)
        if created:
            observe.emit(
                logging.INFO,
                "schedule.created",
                "schedule %r created: %s, policy %s, next tick %s",
                rec.name,
                Timing.of_record(rec).describe(),
                rec.policy,
                _utc(rec.next_at),
                schedule=rec.name,
                policy=rec.policy,
            )
            return stored
        changed = differences(pol, stored, rec)
        if not changed:
            return stored
        retime = any(f in changed for f in TIMING_FIELDS)
        if not await self.store.redefine_schedule(rec, retime):  # deleted meanwhile
            stored, _ = await self.store.create_schedule(rec)
            return stored
        observe.emit(
            logging.INFO,
            "schedule.updated",
            "schedule %r updated (%s changed)%s",
            rec.name,
            ", ".join(changed),
            f"; next tick {_utc(rec.next_at)}" if retime else "",
            schedule=rec.name,
            changed=changed,
        )
        return await self.get(rec.name)

    # -- managing ------------------------------------------------------------------
    async def all(self) -> list[ScheduleRecord]:
        """Every schedule of the store, by name."""
        await self.runner.open()
        return await self.store.list_schedules()

    # -- managing ------------------------------------------------------------------
    async def get(self, name: str) -> ScheduleRecord:
        """The schedule named ``name``, or :class:`~stalwart.ScheduleNotFound`."""
        await self.runner.open()
        found = await self.store.get_schedule(name)
        if found is None:
            raise ScheduleNotFound(f"no schedule {name[:80]!r} in {mask_url(self.store.url)}")
        return found

    async def pause(self, name: str) -> ScheduleRecord:
        """Stop ticking (a run already started goes on); kept until resumed."""
        await self.runner.open()
        if not await self.store.pause_schedule(name, True, None):
            raise ScheduleNotFound(f"no schedule {name[:80]!r} in {mask_url(self.store.url)}")
        observe.emit(logging.INFO, "schedule.paused", "schedule %r paused", name, schedule=name)
        return await self.get(name)

    async def resume(self, name: str) -> ScheduleRecord:
        """Tick again from the next tick after now: ticks that fell while it
        was paused do not run (they were not missed, they were paused)."""
        s = await self.get(name)  # opens the runner
        upcoming = Timing.of_record(s).following(math.floor(self.clock()))
        if not await self.store.pause_schedule(name, False, upcoming):
            raise ScheduleNotFound(f"no schedule {name[:80]!r} in {mask_url(self.store.url)}")
        observe.emit(
            logging.INFO,
            "schedule.resumed",
            "schedule %r resumed; next tick %s",
            name,
            _utc(upcoming),
            schedule=name,
        )
        return await self.get(name)

    async def delete(self, name: str, *, missing_ok: bool = False) -> bool:
        """Delete the schedule (the runs it started stay); whether it existed."""
        await self.runner.open()
        gone = await self.store.delete_schedule(name)
        if not gone and not missing_ok:
            raise ScheduleNotFound(f"no schedule {name[:80]!r} in {mask_url(self.store.url)}")
        if gone:
            observe.emit(
                logging.INFO, "schedule.deleted", "schedule %r deleted", name, schedule=name
            )
        return gone

    # -- ticking --------------------------------------------------------------------
    async def tick(self) -> list[str]:
        """Start the runs of the schedules that are due; the ids of the runs
        created. Called by a serving runner's worker loop (which claims them
        next), at most once per ``interval``. A schedule that cannot tick (its policy is not
        registered here, its row is corrupted) is logged once and left for
        later; it never stops the loop. Only a store that is down raises
        (the loop reports it once per outage)."""
        checked = time.monotonic()
        if checked < self._next_check:
            return []
        self._next_check = checked + self.interval
        now = self.clock()
        created: list[str] = []
        try:
            due = await self.store.due_schedules(now, DUE_BATCH, self._after)
        except StoreUnavailable:
            raise
        except Exception as exc:
            self._report("(all)", f"cannot read the due schedules: {exc}")
            return []
        self._after = (due[-1].next_at, due[-1].name) if len(due) >= DUE_BATCH else None
        for s in due:
            try:
                run_id = await self._tick_one(s, now)
            except StoreUnavailable:
                raise
            except Exception as exc:  # one bad schedule never stops the others
                self._report(s.name, f"{type(exc).__name__}: {exc}")
                continue
            if run_id is not None:
                created.append(run_id)
        return created

    async def _tick_one(self, s: ScheduleRecord, now: float) -> str | None:
        check_schedule(s)  # a row edited by hand fails here, by schedule and field
        pol = self.runner.find_policy(s.policy)
        if pol is None:
            self._report(
                s.name,
                f"its policy {s.policy!r} is not registered in this worker (Runner(policies="
                "[...]) or --app); the schedule waits for a worker that has it",
            )
            return None
        read_inputs(f"{s.name}@(schedule)", s.inputs)  # a corrupted row fails here, by name
        timing = Timing.of_record(s)
        latest, run_tick, upcoming = plan(s, timing, now)
        created_id: str | None = None
        if run_tick is not None:
            run_id = tick_run_id(s.name, run_tick)
            hooks = self.runner.hooks
            rec = RunRecord(
                run_id,
                pol.name,
                s.inputs,
                code_version=self.runner.version_of(pol),
                queue=s.queue,
                priority=s.priority,
                trace=trace_for(hooks, run_id, pol.name) if hooks else None,
                tags=s.tags,
            )
            # Created before the next tick is recorded: a worker killed in
            # between leaves the tick due, and the next one finds this run.
            _, created = await self.store.create_run(rec)
            if created:
                started(rec)
                created_id = run_id
        missed = latest != s.next_at or now - latest > s.grace
        advanced = await self.store.advance_schedule(
            s.name, s.next_at, upcoming, run_tick if run_tick is not None else s.last_at
        )
        self._trouble.pop(s.name, None)
        if advanced and missed:
            one = latest == s.next_at
            ticks = (
                f"the tick at {_utc(latest)} was"
                if one
                else f"ticks from {_utc(s.next_at)} to {_utc(latest)} were"
            )
            them = "it" if one else "them"
            observe.emit(
                logging.WARNING,
                "schedule.missed",
                "schedule %r: %s missed (no worker took %s within %g s); missed=%s: %s; "
                "next tick %s",
                s.name,
                ticks,
                them,
                s.grace,
                s.missed,
                f"one run for {them}" if run_tick is not None else f"no run for {them}",
                _utc(upcoming),
                schedule=s.name,
            )
        return created_id

    def _report(self, name: str, trouble: str) -> None:
        if self._trouble.get(name) == trouble:
            return
        self._trouble[name] = trouble
        observe.emit(
            logging.ERROR,
            "schedule.error",
            "schedule %r cannot tick: %s",
            name,
            trouble,
            schedule=name,
        )


def _utc(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
