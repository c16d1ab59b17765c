"""Recurring schedules: a policy started on a timetable, once per tick, across all workers.

``runner.schedule(report, cron="0 2 * * *", timezone="Europe/Paris")`` keeps a
row in the store (:class:`~stalwart.stores.base.ScheduleRecord`): the policy by
its registered name, the runs' inputs, the timing, the next tick, a paused
flag. Nothing else: no module path, no code (S13). Every runner that serves
(``serve()``, ``stalwart worker``, ``Runner(recover=True)``) looks for due
schedules in its poll loop (:meth:`Schedules.tick`) and starts their runs.

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
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..core.errors import StalwartError, StoreUnavailable
from ..core.events import Hook
from ..core.ledger import CHILD_MARK, RunRecord
from ..core.policy import Policy
from ..core.redact import mask_url
from ..core.schema import ArgumentError
from ..stores.base import ScheduleRecord, Store, check_schedule
from . import observe
from .identity import read_inputs, run_inputs, same_inputs
from .observe import started, trace_for
from .registry import Registry

__all__ = [
    "MISSED",
    "ScheduleError",
    "ScheduleNotFound",
    "ScheduleRecord",
    "Schedules",
    "Timing",
    "tick_of",
    "tick_run_id",
]

#: What a schedule does with ticks no worker reached in time.
MISSED = ("once", "skip")
#: The longest schedule name: its tick's run id adds 21 characters.
MAX_NAME = 200
#: Most due schedules handled in one poll; the rest wait for the next (each
#: poll reads the page after the last one, so none waits for ever).
DUE_BATCH = 100
# Bound on the steps taken to get past a time while looking for a tick (a
# daylight-saving oddity); never reached by a sane expression.
_SEARCH = 1000
_TICK_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_TICK_ID = re.compile(r"^(.+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$", re.DOTALL)
# The fields of a five-field expression; a sixth, first, is seconds.
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_ALLOWED = {
    "second": "0-59",
    "minute": "0-59",
    "hour": "0-23",
    "day-of-month": "1-31, L or LW",
    "month": "1-12 or JAN-DEC",
    "day-of-week": "0-7 or SUN-SAT, with L or #n",
}
_TIMING_FIELDS = ("cron", "every", "timezone")
_DEFINITION = ("policy", "inputs", "cron", "every", "timezone", "missed", "grace", "queue")


class ScheduleError(StalwartError, ValueError):
    """A schedule's definition is wrong (the message names the schedule and
    the field), or it can no longer tick."""


class ScheduleNotFound(StalwartError, LookupError):
    """No schedule has this name in the store."""


def tick_run_id(name: str, tick: int) -> str:
    """The id of the run a schedule starts for the tick at ``tick`` (seconds
    since the epoch): the same on every worker, so a tick makes one run."""
    return f"{name}@{datetime.fromtimestamp(tick, UTC).strftime(_TICK_FORMAT)}"


def tick_of(run_id: str) -> tuple[str, datetime] | None:
    """The schedule name and tick time (UTC) of a run a schedule started, or
    None if ``run_id`` does not read as one: a policy can ask what tick it
    is running for (``tick_of(ctx.run_id)``)."""
    match = _TICK_ID.match(run_id)
    if match is None:
        return None
    at = datetime.strptime(match.group(2), _TICK_FORMAT).replace(tzinfo=UTC)
    return match.group(1), at


def check_name(name: object) -> str:
    """A schedule name: printable text, without ``~`` (kept for child runs),
    at most :data:`MAX_NAME` characters, as its ticks' run ids need."""
    if not isinstance(name, str):
        raise ScheduleError(f"a schedule name is a string, not {type(name).__name__}")
    if not name or name.strip() != name:
        raise ScheduleError(f"schedule name {name!r} is empty or starts or ends with white space")
    if len(name) > MAX_NAME:
        raise ScheduleError(f"a schedule name has at most {MAX_NAME} characters, not {len(name)}")
    if CHILD_MARK in name or not name.isprintable():
        raise ScheduleError(
            f"schedule name {name[:80]!r} contains {CHILD_MARK!r} or control characters"
        )
    return name


def _seconds(value: object, what: str, name: str) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScheduleError(
            f"schedule {name!r}: {what} is a number of seconds or a timedelta, not {value!r}"
        )
    if not math.isfinite(value):
        raise ScheduleError(f"schedule {name!r}: {what} must be finite, not {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Timing:
    """When a schedule ticks: a cron expression in a time zone, or an interval."""

    cron: str | None
    every: int | None
    timezone: str
    zone: tzinfo

    @classmethod
    def of(cls, name: str, cron: object, every: object, timezone: object) -> Timing:
        """Check a timing and build it; a :class:`ScheduleError` names what is wrong."""
        if (cron is None) == (every is None):
            raise ScheduleError(
                f"schedule {name!r}: give exactly one of cron= (an expression) and every= "
                "(an interval)"
            )
        zone = _zone(name, timezone)
        if every is not None:
            if timezone != "UTC":
                raise ScheduleError(
                    f"schedule {name!r}: timezone applies to cron= only; an interval "
                    "(every=) ticks the same in every zone"
                )
            seconds = _seconds(every, "every", name)
            if seconds < 1 or seconds != int(seconds):
                raise ScheduleError(
                    f"schedule {name!r}: every must be a whole number of seconds, at least 1 "
                    f"(got {seconds:g})"
                )
            return cls(None, int(seconds), "UTC", zone)
        if not isinstance(cron, str):
            raise ScheduleError(
                f"schedule {name!r}: cron is an expression such as '*/15 * * * *', not {cron!r}"
            )
        expr = " ".join(cron.split())
        _check_cron(name, expr, zone)
        return cls(expr, None, str(timezone), zone)

    @classmethod
    def of_record(cls, s: ScheduleRecord) -> Timing:
        return cls.of(s.name, s.cron, s.every, s.timezone)

    def following(self, t: int) -> int:
        """The first tick strictly after ``t`` (whole seconds since the epoch)."""
        if self.every is not None:
            return (t // self.every + 1) * self.every
        assert self.cron is not None
        it = CronSim(self.cron, datetime.fromtimestamp(t, self.zone))
        for _ in range(_SEARCH):
            try:
                found = int(next(it).timestamp())
            except StopIteration:
                break
            if found > t:
                return found
        raise ScheduleError(
            f"cron expression {self.cron!r} has no tick after "
            f"{datetime.fromtimestamp(t, UTC):%Y-%m-%d %H:%M:%S} UTC"
        )

    def latest(self, now: float, floor: int) -> int:
        """The last tick at or before ``now``, and not before ``floor`` (a
        tick that is due): found directly, however many ticks lie between."""
        upto = math.floor(now)
        if upto <= floor:
            return floor
        if self.every is not None:
            return max(floor, upto // self.every * self.every)
        assert self.cron is not None
        try:
            back = CronSim(self.cron, datetime.fromtimestamp(upto + 1, self.zone), reverse=True)
            found = int(next(back).timestamp())
        except StopIteration:
            found = floor
        # Going back from inside the hour a daylight-saving change repeats,
        # the search can miss the tick of that same night (it lies in the
        # hour's first pass): step forward from what it found to be sure.
        found = found if floor <= found <= upto else floor
        for _ in range(_SEARCH):
            later = self.following(found)
            if later > upto:
                break
            found = later
        return found

    def describe(self) -> str:
        """The timing in words, for listings."""
        if self.every is not None:
            return f"every {_span(self.every)}"
        assert self.cron is not None
        try:
            words = CronSim(self.cron, datetime.now(self.zone)).explain()
        except Exception:  # explain() is best effort; the expression was checked
            words = self.cron
        return f"{words} ({self.timezone})"


def _span(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _zone(name: str, timezone: object) -> tzinfo:
    if not isinstance(timezone, str) or not timezone:
        raise ScheduleError(
            f"schedule {name!r}: timezone is an IANA name such as 'Europe/Paris', not {timezone!r}"
        )
    if timezone == "UTC":
        return UTC
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"schedule {name!r}: unknown time zone {timezone[:80]!r} (an IANA name such as "
            "'Europe/Paris', 'America/New_York' or 'UTC')"
        ) from None


def _check_cron(name: str, expr: str, zone: tzinfo) -> None:
    parts = expr.split()
    if len(parts) not in (5, 6):
        raise ScheduleError(
            f"schedule {name!r}: bad cron expression {expr[:100]!r}: it has {len(parts)} "
            "fields, not 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"
        )
    fields = _FIELDS if len(parts) == 5 else ("second", *_FIELDS)
    try:
        it = CronSim(expr, datetime.now(zone))
    except CronSimError as exc:
        field = str(exc).removeprefix("Bad ").strip()
        if field in fields:
            text = parts[fields.index(field)]
            raise ScheduleError(
                f"schedule {name!r}: bad cron expression {expr[:100]!r}: the {field} field "
                f"{text[:40]!r} is not valid (allowed: {_ALLOWED[field]})"
            ) from None
        raise ScheduleError(
            f"schedule {name!r}: bad cron expression {expr[:100]!r}: {exc}"
        ) from None
    try:
        next(it)
    except StopIteration:
        raise ScheduleError(
            f"schedule {name!r}: cron expression {expr!r} never fires (no tick in 50 years)"
        ) from None


def plan(s: ScheduleRecord, timing: Timing, now: float) -> tuple[int, int | None, int]:
    """What a worker does with a due schedule at ``now``: the latest due
    tick, the tick to start a run for (None: the missed ticks are skipped),
    and the next tick."""
    latest = timing.latest(now, s.next_at)
    upcoming = timing.following(latest)
    for _ in range(_SEARCH):
        if upcoming > now:
            break
        upcoming = timing.following(upcoming)
    else:
        raise ScheduleError(f"schedule {s.name!r}: no tick after now")
    on_time = now - latest <= s.grace
    return latest, (latest if on_time or s.missed == "once" else None), upcoming


def _differences(pol: Policy[Any, Any], stored: ScheduleRecord, given: ScheduleRecord) -> list[str]:
    changed = []
    for field in _DEFINITION:
        a, b = getattr(stored, field), getattr(given, field)
        if field == "inputs":
            same = stored.policy == given.policy and same_inputs(pol, a, b)
        else:
            same = a == b
        if not same:
            changed.append(field)
    if stored.priority != given.priority:
        changed.append("priority")
    return changed


class Schedules:
    """A runner's schedules: defined, listed, paused, and ticked by its worker loop.

    ``clock`` is what time it is for schedules (seconds since the epoch):
    ``time.time`` unless a test controls it. ``interval`` is how often
    :meth:`tick` asks the store (the runner's poll interval).
    """

    def __init__(
        self,
        store: Store,
        registry: Registry,
        *,
        version: Callable[[Policy[Any, Any]], str],
        hooks: Sequence[Hook],
        wake: Callable[[], None],
        clock: Callable[[], float] | None,
        interval: float,
    ) -> None:
        self.store = store
        self.registry = registry
        self.version = version
        self.hooks = tuple(hooks)
        self.wake = wake
        self.clock: Callable[[], float] = clock or time.time
        self.interval = interval
        self._next_check = 0.0
        # Where the last poll's page of due schedules ended, when it was full:
        # the next poll reads the page after it.
        self._after: tuple[Any, str] | None = None
        # What was last logged about a schedule that could not tick, so a
        # trouble that lasts is logged once, not once per poll.
        self._trouble: dict[str, str] = {}

    # -- defining ----------------------------------------------------------------
    async def define(
        self,
        pol: Policy[Any, Any],
        *,
        name: str | None,
        cron: str | None,
        every: timedelta | float | None,
        timezone: str,
        missed: str,
        grace: timedelta | float,
        queue: str,
        priority: int,
        inputs: Mapping[str, Any],
        open_store: Callable[[], Awaitable[None]],
    ) -> ScheduleRecord:
        """Check everything, then create the schedule, leave it as it is (the
        same definition), or update it (another one). See ``Runner.schedule``."""
        rec = self._record(pol, name, cron, every, timezone, missed, grace, queue, priority, inputs)
        await open_store()
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
        changed = _differences(pol, stored, rec)
        if not changed:
            return stored
        retime = any(f in changed for f in _TIMING_FIELDS)
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

    def _record(
        self,
        pol: Policy[Any, Any],
        name: str | None,
        cron: str | None,
        every: timedelta | float | None,
        timezone: str,
        missed: str,
        grace: timedelta | float,
        queue: str,
        priority: int,
        inputs: Mapping[str, Any],
    ) -> ScheduleRecord:
        name = check_name(pol.name if name is None else name)
        timing = Timing.of(name, cron, every, timezone)
        if missed not in MISSED:
            raise ScheduleError(
                f"schedule {name!r}: missed must be 'once' (one run for all missed ticks) "
                f"or 'skip' (none), not {missed!r}"
            )
        grace_s = _seconds(grace, "grace", name)
        if grace_s < 0:
            raise ScheduleError(f"schedule {name!r}: grace cannot be negative ({grace_s:g})")
        if not isinstance(queue, str) or not queue:
            raise ScheduleError(f"schedule {name!r}: queue is a queue's name, not {queue!r}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ScheduleError(f"schedule {name!r}: priority is an integer, not {priority!r}")
        given = dict(inputs)
        try:
            valid = pol.validate(given)
        except ArgumentError as exc:
            raise ArgumentError(f"schedule {name!r}: {exc}") from None
        kwargs = {k: valid.get(k, v) for k, v in given.items()}
        recorded = run_inputs(pol, f"{name}@(schedule)", (), kwargs)
        now = self.clock()
        next_at = timing.following(math.floor(now))
        try:
            tick_run_id(name, next_at)
        except (OverflowError, ValueError, OSError):
            raise ScheduleError(
                f"schedule {name!r}: every={timing.every} puts its first tick past the year "
                "9999, where no tick could be named"
            ) from None
        return ScheduleRecord(
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
        )

    # -- managing ------------------------------------------------------------------
    async def get(self, name: str) -> ScheduleRecord:
        found = await self.store.get_schedule(name)
        if found is None:
            raise ScheduleNotFound(f"no schedule {name[:80]!r} in {mask_url(self.store.url)}")
        return found

    async def pause(self, name: str) -> ScheduleRecord:
        """Stop ticking (a run already started goes on); kept until resumed."""
        if not await self.store.pause_schedule(name, True, None):
            raise ScheduleNotFound(f"no schedule {name[:80]!r} in {mask_url(self.store.url)}")
        observe.emit(logging.INFO, "schedule.paused", "schedule %r paused", name, schedule=name)
        return await self.get(name)

    async def resume(self, name: str) -> ScheduleRecord:
        """Tick again from the next tick after now: ticks that fell while it
        was paused do not run (they were not missed, they were paused)."""
        s = await self.get(name)
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

    async def delete(self, name: str, missing_ok: bool) -> bool:
        """Delete the schedule; the runs it started stay."""
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
        created. Called by a serving runner's worker loop, at most once per
        ``interval``. A schedule that cannot tick (its policy is not
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
        if created:
            self.wake()
        return created

    async def _tick_one(self, s: ScheduleRecord, now: float) -> str | None:
        check_schedule(s)  # a row edited by hand fails here, by schedule and field
        pol = self.registry.find(s.policy)
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
            rec = RunRecord(
                run_id,
                pol.name,
                s.inputs,
                code_version=self.version(pol),
                queue=s.queue,
                priority=s.priority,
                trace=trace_for(self.hooks, run_id, pol.name) if self.hooks else None,
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
