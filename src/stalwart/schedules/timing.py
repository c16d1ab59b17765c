"""When a schedule ticks: its timing (a cron expression in a time zone, or an
interval), the tick's run id, and the checks a definition passes before it
is stored (:mod:`.schedules` ticks them)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..core.errors import ScheduleError
from ..core.ledger import CHILD_MARK
from ..core.policy import Policy
from ..runner.inputs import same_inputs
from ..stores.base import SCHEDULE_MISSED, ScheduleRecord

__all__ = [
    "DUE_BATCH",
    "MISSED",
    "TIMING_FIELDS",
    "Timing",
    "check_name",
    "check_seconds",
    "differences",
    "plan",
    "tick_of",
    "tick_run_id",
]

#: What a schedule does with ticks no worker reached in time (the rule a
#: stored row is checked against too).
MISSED = SCHEDULE_MISSED
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
TIMING_FIELDS = ("cron", "every", "timezone")
_DEFINITION = (
    "policy", "inputs", "cron", "every", "timezone", "missed", "grace", "queue", "tags",
)  # fmt: skip


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


def check_seconds(value: object, what: str, name: str) -> float:
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
            seconds = check_seconds(every, "every", name)
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


def differences(pol: Policy[Any, Any], stored: ScheduleRecord, given: ScheduleRecord) -> list[str]:
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
