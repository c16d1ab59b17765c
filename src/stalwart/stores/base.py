"""The Store interface: what the engine needs from a durable ledger.

It is small on purpose. The engine decides what to record and when; a store
only keeps rows in order, enforces that the first result of a step wins (S3),
refuses writes with a stale fencing token (S8), and answers a few queries.
Values arrive already serialized to JSON text, so a store never sees Python
objects and every store stores the same bytes.
"""

from __future__ import annotations

import abc
import bisect
import json
import math
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import CorruptedRecord, StoreError
from ..core.ledger import (
    CHILDREN_WAIT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    RunRecord,
    RunStatus,
    StepRecord,
    StoredStep,
)
from ..core.mail import GENERATION_KEY, Delivery
from ..core.memory import MemoryRecord
from ..core.stepargs import is_compact, whole_steps
from ..core.tags import check_tags
from .outages import NO_OUTAGES, Outages
from .versions import VersionRecord, WorkerRecord

__all__ = [
    "SCHEDULE_MISSED",
    "Beat",
    "Reseal",
    "RunDump",
    "ScheduleRecord",
    "SignalRecord",
    "StepPage",
    "StepPosition",
    "Store",
    "archived_run",
    "check_schedule",
    "children_prefix",
    "dead_holder",
    "not_waiting",
    "owner_is_dead",
    "run_from_row",
    "run_to_row",
    "schedule_from_row",
    "step_row",
    "this_host",
]

# Which machine this process is on, for telling a dead holder from a distant
# one. STALWART_HOSTNAME overrides it (containers sharing a hostname; tests
# that simulate several machines on one).
_HOST = os.environ.get("STALWART_HOSTNAME") or socket.gethostname()


def this_host() -> str:
    return _HOST


def owner_is_dead(owner: str | None) -> bool:
    """Whether the holder of a lease is a process on this host that has exited.

    Owners are "host:pid:nonce". A holder on another host is never judged
    dead here: only its lease expiring frees its runs.
    """
    if not owner:
        return True
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


# What every store shares: the column order of a run's row (RunRecord's field
# order), how large a value may be before it leaves the hot table, and the
# error a cancelled run records.
RUN_COLUMNS = (
    "id, policy, inputs, status, result, error, created_at, updated_at, code_version, "
    "wake_at, waiting_for, owner, lease_expires_at, fence, cancel_requested, queue, "
    "priority, parent_id, trace, tags, cleared"
)
_RUN_FIELDS = tuple(c.strip() for c in RUN_COLUMNS.split(","))
SPILL_BYTES = 16 * 1024
SPILL_FIELDS = (("args", 1), ("output", 2), ("error", 4))
CANCELLED_ERROR = '{"type":"stalwart.errors.CancelledRun","message":"run was cancelled"}'


def dead_holder(rec: RunRecord) -> str | None:
    """``rec``'s holder if it is running and known dead, else None (which
    equals no owner in SQL)."""
    dead = rec.status == "running" and rec.owner and owner_is_dead(rec.owner)
    return rec.owner if dead else None


def ends_cancelled(rec: RunRecord, owner: str, accept: Callable[[RunRecord], bool]) -> bool:
    """Whether ``owner``'s claim pass ends ``rec``, a running run it read as
    abandoned, as cancelled instead of taking it over: every store's rule.

    A run asked to cancel whose holder is gone ends without executing again,
    whichever worker reads it: ending it executes nothing, so neither the
    caller's ``policies`` nor its ``accept`` hold it back (a worker that
    lacks the policy would otherwise leave it running, unclaimable, for
    ever). Only a run the caller holds itself is up to ``accept``, which
    knows whether it executes there: then its heartbeat sees the request
    and the run stops at its next await (S9).
    """
    return rec.cancel_requested and (rec.owner != owner or accept(rec))


def children_prefix(waiting_for: str | None) -> str | None:
    """The id prefix of the child runs a run waits for, if it waits for children.

    Stores check those children when the run suspends, so a child that
    finished in between cannot leave the parent waiting for its timer.
    """
    if waiting_for is not None and waiting_for.startswith(CHILDREN_WAIT):
        return waiting_for[len(CHILDREN_WAIT) :]
    return None


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A RunRecord from a row selected with :data:`RUN_COLUMNS`.

    A row edited by hand into the wrong shape (text where a number belongs)
    is a :class:`~stalwart.core.errors.CorruptedRecord` naming the run and field,
    not a TypeError deep inside whoever reads it.
    """
    record = RunRecord(*row)
    for name, kinds in _ROW_TYPES:
        value = getattr(record, name)
        if not isinstance(value, kinds):
            raise CorruptedRecord(
                f"run {str(record.id)[:80]!r}: field {name!r} holds "
                f"{type(value).__name__}, not {' or '.join(k.__name__ for k in kinds)}"
            )
    record.cancel_requested = bool(record.cancel_requested)
    return record


_NUM = (int, float)
_TEXT_OR_NONE = (str, type(None))
_ROW_TYPES: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("id", (str,)),
    ("policy", (str,)),
    ("inputs", (str,)),
    ("status", (str,)),
    ("result", _TEXT_OR_NONE),
    ("error", _TEXT_OR_NONE),
    ("created_at", _NUM),
    ("updated_at", _NUM),
    ("wake_at", (*_NUM, type(None))),
    ("waiting_for", _TEXT_OR_NONE),
    ("owner", _TEXT_OR_NONE),
    ("fence", (int,)),
    ("queue", (str,)),
    ("priority", (int,)),
    ("parent_id", _TEXT_OR_NONE),
    ("trace", _TEXT_OR_NONE),
    ("tags", _TEXT_OR_NONE),
    ("cleared", _TEXT_OR_NONE),
)


def archived_run(run: RunRecord, archive_id: str, now: float) -> RunRecord:
    """The finished run that keeps a generation of ``run`` after it continued
    as new: same policy, inputs and queue, no parent (so it is pruned like
    any finished run, S12), its result naming the run that goes on."""
    result = json.dumps({"continued_as": run.id}, separators=(",", ":"))
    return RunRecord(
        archive_id,
        run.policy,
        run.inputs,
        "succeeded",
        result,
        None,
        now,
        now,
        run.code_version,
        queue=run.queue,
        priority=run.priority,
        trace=run.trace,
    )


def step_row(run_id: str, step: StoredStep) -> tuple[Any, ...]:
    """The parameters of ``Statements.insert_step`` for a small step."""
    return (
        run_id,
        step.key,
        step.name,
        step.kind,
        step.args_hash,
        step.args,
        step.output,
        step.error,
        step.attempts,
        step.started_at,
        step.finished_at,
    )


def run_to_row(run: RunRecord) -> tuple[Any, ...]:
    """The values of :data:`RUN_COLUMNS` for ``run``, in order."""
    return tuple(getattr(run, name) for name in _RUN_FIELDS)


@dataclass(slots=True)
class Beat:
    """What a heartbeat learned about the runs an owner is executing."""

    cancel: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SignalRecord:
    run_id: str
    name: str
    payload: str
    consumed_by: str | None = None
    uid: str | None = None
    created_at: float = 0.0


#: Where a step sits among its run's: ``(finished_at, key)``. The order the
#: readers show a run's steps in and page them by (:meth:`Store.step_page`):
#: the order they finished, ties in key order (keys compared as text).
StepPosition = tuple[float, str]


@dataclass(slots=True)
class StepPage:
    """Some of a run's steps, whole, in finish order (:data:`StepPosition`),
    and where they sit among the run's ``count`` steps: ``earlier`` of them
    come before the page, :attr:`later` after it."""

    steps: list[StepRecord]
    count: int
    earlier: int

    @property
    def later(self) -> int:
        """How many of the run's steps come after the page."""
        return max(self.count - self.earlier - len(self.steps), 0)

    @property
    def first(self) -> StepPosition | None:
        """The position of the page's first step: ``before`` for the page before."""
        return (self.steps[0].finished_at, self.steps[0].key) if self.steps else None

    @property
    def last(self) -> StepPosition | None:
        """The position of the page's last step: ``after`` for the page after."""
        return (self.steps[-1].finished_at, self.steps[-1].key) if self.steps else None


@dataclass(frozen=True, slots=True)
class Reseal:
    """One recorded value to write again in place (:meth:`Store.reseal`):
    in ``table`` (``runs``, ``steps``, ``signals``, ``schedules``,
    ``memory``), the row of ``owner`` (a run id, a schedule's name, a
    memory namespace) and ``key`` (a step's key, a signal's name, a memory
    key; "" for a run or a schedule), its ``field``: ``new`` if it still
    holds ``old``."""

    table: str
    owner: str
    key: str
    field: str
    old: str
    new: str


@dataclass(slots=True)
class RunDump:
    """One run as a store keeps it, spilled payloads merged back: what
    :meth:`Store.export_run` reads and :meth:`Store.import_run` writes, so a
    run moves between stores (``stalwart.timetravel``) byte for byte: its
    steps as stored (compact arguments stay compact)."""

    run: RunRecord
    steps: list[StoredStep]
    signals: list[SignalRecord]

    def records(self) -> dict[str, StepRecord]:
        """The steps by key, whole, as a reader gets them (a CorruptedRecord
        naming the run and the step if one cannot be rebuilt)."""
        return whole_steps(self.run.id, {s.key: s for s in self.steps})


@dataclass(slots=True)
class ScheduleRecord:
    """A recurring schedule as a store keeps it: data only (S13).

    ``policy`` is a registered policy's *name*, never a module path: a worker
    starts a tick's run only under a policy it was given. ``inputs`` is the
    JSON of the runs' arguments, as a run records them. Exactly one of
    ``cron`` (an expression read in ``timezone``) and ``every`` (whole
    seconds, ticks aligned to the Unix epoch) is set. ``next_at`` and
    ``last_at`` are tick times in whole seconds since the epoch; ``missed``
    ("once" or "skip") says what happens to ticks no worker reached within
    ``grace`` seconds (see :mod:`stalwart.schedules`).
    """

    name: str
    policy: str
    inputs: str
    cron: str | None
    every: int | None
    timezone: str
    missed: str
    grace: float
    queue: str
    priority: int
    next_at: int
    last_at: int | None = None
    paused: bool = False
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    #: The tags of the runs it starts (``encode_tags`` text), or None.
    tags: str | None = None


SCHEDULE_COLUMNS = (
    "name, policy, inputs, cron, every, timezone, missed, grace, queue, priority, "
    "next_at, last_at, paused, created_at, updated_at, tags"
)
_INT_OR_NONE = (int, type(None))
_SCHEDULE_TYPES: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("name", (str,)),
    ("policy", (str,)),
    ("inputs", (str,)),
    ("cron", (str, type(None))),
    ("every", _INT_OR_NONE),
    ("timezone", (str,)),
    ("missed", (str,)),
    ("grace", (int, float)),
    ("queue", (str,)),
    ("priority", (int,)),
    ("next_at", (int,)),
    ("last_at", _INT_OR_NONE),
    ("created_at", (int, float)),
    ("updated_at", (int, float)),
    ("tags", (str, type(None))),
)


def schedule_from_row(row: Sequence[Any], check: bool = True) -> ScheduleRecord:
    """A ScheduleRecord from a row selected with :data:`SCHEDULE_COLUMNS`;
    a row of the wrong shape is a CorruptedRecord naming schedule and field.

    ``check=False`` leaves that to :func:`check_schedule`: the due schedules
    are read that way, so that one row edited by hand is that schedule's
    error when it ticks, not the whole batch's (every schedule would stop).
    """
    record = ScheduleRecord(*row)
    if check:
        check_schedule(record)
    record.paused = bool(record.paused)
    return record


def check_schedule(record: ScheduleRecord) -> ScheduleRecord:
    """``record`` if each field holds its type and a value a schedule can
    have; else a CorruptedRecord naming the schedule and the field (a row
    edited by hand: a NaN grace, an unknown missed policy)."""
    for name, kinds in _SCHEDULE_TYPES:
        value = getattr(record, name)
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise CorruptedRecord(
                f"schedule {str(record.name)[:80]!r}: field {name!r} holds "
                f"{type(value).__name__}, not {' or '.join(k.__name__ for k in kinds)}"
            )
    for name, wanted in _schedule_value_problems(record):
        raise CorruptedRecord(
            f"schedule {record.name[:80]!r}: field {name!r} holds "
            f"{repr(getattr(record, name))[:80]}, not {wanted}"
        )
    return record


#: What a schedule does with ticks no worker reached in time (see
#: :mod:`stalwart.schedules`).
SCHEDULE_MISSED = ("once", "skip")


def _schedule_value_problems(s: ScheduleRecord) -> list[tuple[str, str]]:
    """The fields of a well-typed record whose values no definition gives."""
    problems: list[tuple[str, str]] = []
    if not s.name:
        problems.append(("name", "a non-empty name"))
    if (s.cron is None) == (s.every is None):
        problems.append(("every" if s.every is not None else "cron", "exactly one of cron, every"))
    if s.every is not None and s.every < 1:
        problems.append(("every", "a whole number of seconds, at least 1"))
    if not s.timezone:
        problems.append(("timezone", "a time zone's name"))
    if s.missed not in SCHEDULE_MISSED:
        problems.append(("missed", "'once' or 'skip'"))
    if not (math.isfinite(s.grace) and s.grace >= 0):
        problems.append(("grace", "a finite number of seconds, not negative"))
    if not s.queue:
        problems.append(("queue", "a queue's name"))
    if not PRIORITY_MIN <= s.priority <= PRIORITY_MAX:
        problems.append(("priority", f"a priority from {PRIORITY_MIN} to {PRIORITY_MAX}"))
    for name in ("created_at", "updated_at"):
        if not math.isfinite(getattr(s, name)):
            problems.append((name, "a finite time"))
    if s.tags is not None:
        try:
            check_tags(json.loads(s.tags))
        except (ValueError, TypeError):
            problems.append(("tags", "a JSON object of tags"))
    return problems


def not_waiting(run_id: str, name: str, status: str) -> str:
    """What a :class:`~stalwart.core.errors.SignalRefused` says of a send
    whose ``wait_fence`` names a wait that is not open now."""
    return (
        f"run {run_id!r} no longer has that wait for a signal {name!r} open (it is "
        f"{status}): another answer came first; nothing was sent"
    )


class Store(abc.ABC):
    """A durable ledger of runs, steps and signals.

    Every method that writes for a run being executed takes the ``fence`` its
    claim returned and raises :class:`~stalwart.core.errors.StaleLeaseError` when
    another owner has claimed the run since.
    """

    url: str = ""
    #: Nothing in the store outlives the process (the memory store): the
    #: engine records no steps there and waits inline instead of suspending.
    ephemeral: bool = False
    #: ``list_runs(text=...)`` can read the runs' values (False on an
    #: encrypted store: its index holds sealed text, so it refuses).
    text_search: bool = True

    @property
    def outages(self) -> Outages:
        """How long this store could not be reached (:mod:`.outages`): the
        PostgreSQL store measures it as its retries fail and succeed; a
        store that measures nothing reports no outage."""
        return NO_OUTAGES

    async def open(self) -> None:  # noqa: B027 - optional for stores
        """Connect and create or migrate the schema."""

    async def close(self) -> None:  # noqa: B027 - optional for stores
        """Release connections; pending group commits are flushed first."""

    async def ddl(self) -> str:
        """The SQL that creates this store's tables at the code's schema
        version, or migrates them from the version they are at, for an
        operator to apply (``stalwart store ddl``); the store is only read."""
        raise StoreError(f"{type(self).__name__} has no SQL tables to provision")

    # -- runs --------------------------------------------------------------
    @abc.abstractmethod
    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Insert ``run`` unless its id exists; return the stored run and whether it is new."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunRecord | None: ...

    @abc.abstractmethod
    async def list_runs(
        self,
        status: str | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        queue: str | None = None,
        policy: str | None = None,
        id_contains: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        before: tuple[float, str] | None = None,
        tags: Mapping[str, str] | None = None,
        text: str | None = None,
    ) -> list[RunRecord]:
        """Runs newest first, by ``(created_at, id)``, up to ``limit``.

        Filters combine: ``status``, ``queue`` and ``policy`` match exactly;
        ``id_contains`` is literal text found anywhere in the id (``%`` and
        ``_`` are plain characters); ``created_after <= created_at <
        created_before``; ``tags``: the run has every one of these tags;
        ``text``: the run's inputs, result and error hold every word of it
        (:mod:`stalwart.stores.search`: whole words, any case; ValueError
        for a text with no word; a store whose :attr:`text_search` is
        false refuses it with a StoreError). To
        page, pass as ``before`` the ``(created_at, id)`` of the last run of
        the previous page: each page then costs its own
        rows however deep it is, where ``offset`` (kept for old callers)
        re-reads every row it skips.
        """

    async def iter_runs(
        self,
        status: str | None = None,
        *,
        most: int | None = None,
        page: int = 500,
        queue: str | None = None,
        policy: str | None = None,
        tags: Mapping[str, str] | None = None,
        text: str | None = None,
    ) -> AsyncIterator[RunRecord]:
        """Every run :meth:`list_runs` would list with these filters, newest
        first, read ``page`` at a time by keyset (each page costs its own
        rows however deep it is), at most ``most`` of them (None: all)."""
        before: tuple[float, str] | None = None
        given = 0
        while most is None or given < most:
            want = page if most is None else min(page, most - given)
            rows = await self.list_runs(
                status, want, queue=queue, policy=policy, tags=tags, text=text, before=before
            )
            for rec in rows:
                yield rec
            given += len(rows)
            if len(rows) < want:
                return
            before = (rows[-1].created_at, rows[-1].id)

    @abc.abstractmethod
    async def count_runs(
        self,
        *,
        queue: str | None = None,
        policy: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, dict[str, int]]:
        """How many runs there are, as ``{status: {queue: count}}``.

        Only statuses and queues that have runs appear; ``queue``,
        ``policy`` and ``tags`` (every one) narrow what is counted. One query.
        """

    @abc.abstractmethod
    async def waiting_for_signals(self, limit: int = 100) -> list[RunRecord]:
        """Suspended runs waiting for a signal (``waiting_for`` holds its
        name; a wait for child runs is not one), the longest waiting first:
        by when they suspended (``updated_at``), then id."""

    @abc.abstractmethod
    async def claim(self, run_id: str, owner: str, lease: float) -> RunRecord | None:
        """Take the run for ``owner`` if it is free, its holder's lease has
        expired, or its holder is known dead; bump and return its fence.
        Return None if someone else holds it or it is finished or suspended
        for the future."""

    @abc.abstractmethod
    async def claim_due(
        self,
        owner: str,
        lease: float,
        limit: int,
        accept: Callable[[RunRecord], bool],
        queues: Sequence[str] | None = None,
        *,
        policies: Collection[str] | None = None,
        versions: Collection[str] | None = None,
        fresh: bool = True,
    ) -> list[RunRecord]:
        """Claim up to ``limit`` ready runs that ``accept`` approves: pending
        (and past their delayed start), woken (timer due or awaited signal
        arrived), or abandoned (lease expired, or holder known dead); only from
        ``queues`` when given, highest priority first, within each queue's
        concurrency and rate limits (:meth:`set_queue`).

        ``policies``, when given, are the only policy names the caller can
        run: the store leaves other runs out before it reads its best few
        (``accept`` is asked only about those), so a backlog of runs of a
        policy the caller lacks never hides the runs it has. None: any.

        ``versions``, when given, are the code versions the caller can
        continue (:mod:`stalwart.runner.routing`): a run that has started is
        left out the same way unless its ``code_version`` is one of them
        (or empty) or it has clearances (``accept`` decides those); and a
        run that never started (pending, fence 0) only if ``fresh``. So a
        backlog of another version's runs never starves a worker.

        An abandoned run asked to cancel is not claimed: it ends
        ``cancelled``, whatever its policy and whatever ``accept`` says,
        unless the caller holds it itself (:func:`ends_cancelled`)."""

    @abc.abstractmethod
    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        """Limit a queue for every worker: at most ``concurrency`` runs
        executing at once, and at most ``rate`` runs started per second."""

    @abc.abstractmethod
    async def create_runs(self, runs: Sequence[RunRecord]) -> list[RunRecord]:
        """Insert many runs in one transaction; ids that exist are left as they are.

        Returns the runs among them that existed before, as stored, so that a
        batch enqueue can hold each id to the same call, as ``create_run``
        lets a single one (one run id is one run, S13). An id given twice is
        created once, from its first record.
        """

    @abc.abstractmethod
    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        """The runs with these ids that exist, in no particular order."""

    @abc.abstractmethod
    async def wake(self, run_id: str, waiting_for: str) -> None:
        """Make the run ready now if it is suspended waiting for ``waiting_for``.

        Unlike a signal, nothing is queued: a run that is not waiting yet
        finds out on its own (its wait has a timer).
        """

    @abc.abstractmethod
    async def unfinished_children(self, parent_id: str, prefix: str) -> int:
        """How many runs of ``parent_id`` whose id starts with ``prefix`` are
        not finished: the last child to finish wakes the parent."""

    @abc.abstractmethod
    async def heartbeat(self, owner: str, lease: float, run_ids: Sequence[str]) -> Beat:
        """Extend ``owner``'s leases on ``run_ids`` (the runs it is executing;
        a run it holds but no longer executes must be let go).

        Returns the ids asked to cancel, and the ids ``owner`` no longer
        holds (another worker took them over, or they finished elsewhere):
        the runner stops executing those at once (S8).
        """

    @abc.abstractmethod
    async def finish_run(
        self, run_id: str, fence: int, status: RunStatus, result: str | None, error: str | None
    ) -> None:
        """Record the outcome once (S10); a second finish is ignored."""

    @abc.abstractmethod
    async def suspend_run(
        self, run_id: str, fence: int, wake_at: float | None, waiting_for: str | None
    ) -> bool:
        """Release the run until ``wake_at`` or a signal named ``waiting_for``.

        Returns False, leaving the run ready, if that signal already arrived.
        """

    @abc.abstractmethod
    async def release(self, run_id: str, fence: int) -> None:
        """Give the run back without finishing it (shutdown): it becomes pending."""

    @abc.abstractmethod
    async def request_cancel(self, run_id: str) -> RunRecord | None:
        """Ask for the run to stop; a run nobody holds is cancelled at once."""

    @abc.abstractmethod
    async def next_wake(self) -> float | None:
        """The earliest time a suspended run wants to wake, if any."""

    @abc.abstractmethod
    async def prune(
        self,
        older_than: float | None = None,
        keep: int | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> int:
        """Delete finished runs finished before ``older_than`` (a timestamp) or
        beyond the ``keep`` most recent; return how many went (S12). With
        ``tags``, only runs that have every one of them are considered (and
        ``keep`` counts among those)."""

    # -- steps -------------------------------------------------------------
    async def load_steps(self, run_id: str) -> dict[str, StepRecord]:
        """The run's steps by key, whole (compact arguments rebuilt). Every
        record is rebuilt: a conversation of N turns holds N copies of its
        history, O(N²) bytes. What shows a run reads a page of it
        (:meth:`step_page`). An unreadable record is a
        :class:`~stalwart.core.errors.CorruptedRecord` naming the run and the step."""
        return whole_steps(run_id, await self.load_stored_steps(run_id))

    async def load_step(self, run_id: str, key: str) -> StepRecord | None:
        """One step of the run, whole (None if it has none at ``key``)."""
        return (await self.steps_by_key(run_id, [key])).get(key)

    @abc.abstractmethod
    async def load_stored_steps(self, run_id: str) -> dict[str, StoredStep]:
        """The run's steps by key as stored (compact arguments stay compact):
        what the engine replays, never a reader's."""

    async def step_page(
        self,
        run_id: str,
        limit: int,
        *,
        before: StepPosition | None = None,
        after: StepPosition | None = None,
    ) -> StepPage:
        """At most ``limit`` of the run's steps, whole, in finish order
        (:data:`StepPosition`): the latest ones, or the latest ones
        ``before`` a position, or the first ones ``after`` one; and how many
        steps the run has and how many come before the page. What shows a
        run reads: only the page's records are rebuilt, so a page costs
        ``limit`` records whatever the run's length (the run's positions are
        read, a number and a key a step). Paging on with the first step's
        position as ``before`` (or the last one's as ``after``) gives every
        step once, as long as no step is recorded in between with an
        earlier time (a slow commit, a skewed clock: the counts then say
        one came).
        """
        if limit < 0:
            raise ValueError(f"steps of run {run_id[:80]!r}: limit {limit} is negative")
        if before is not None and after is not None:
            raise ValueError(f"steps of run {run_id[:80]!r}: page before or after, not both")
        count, times = await self.step_positions(run_id)
        order = sorted((t, k) for k, t in times.items())
        if after is not None:
            earlier = bisect.bisect_right(order, after)
            window = order[earlier : earlier + limit]
        else:
            end = len(order) if before is None else bisect.bisect_left(order, before)
            earlier = max(end - limit, 0)
            window = order[earlier:end]
        found = await self.steps_by_key(run_id, [k for _, k in window]) if window else {}
        # A step moved away in between (continue-as-new) is left out.
        return StepPage([found[k] for _, k in window if k in found], count, earlier)

    async def step_positions(
        self, run_id: str, known: int = -1, since: float = -math.inf
    ) -> tuple[int, dict[str, float]]:
        """How many steps the run has, and, unless that is ``known``, the
        finish times of those of its steps finished at or after ``since``,
        by key: where its steps sit (:data:`StepPosition`), no record read.
        What a reader that holds ``known`` of the run's steps polls for (the
        event stream of ``GET /runs/{id}/events``), one snapshot for both;
        it then reads the records it lacks with :meth:`steps_by_key`.

        Why a count, and ``since`` only a hint. Steps are written by workers
        on other machines whose clocks differ, and commit in another order
        than they finished, so a step recorded later may carry an earlier
        ``finished_at``: a time is no cursor. The tables keep no sequence
        number either (and one drawn from a PostgreSQL sequence would commit
        out of order just the same). What cannot miss a step is the count: a
        run's steps are only ever added (prune deletes whole runs), so a
        reader whose ``known`` steps are all distinct steps of the run holds
        all of them exactly when the count is ``known``. A quiet poll so
        costs one number, no row. When the count differs, the steps near the
        newest are returned (the reader picks ``since``), and a reader for
        whom they do not make up the count (a step recorded late, beyond
        ``since``) reads again with ``since=-math.inf``: every step's
        position. A count below ``known`` says the steps were moved away
        (continue-as-new archives a generation's steps): the reader starts
        over. So that a new generation exactly as long as the old one is not
        taken for a quiet run, the generation's own record (key ``"0"``,
        which continue-as-new writes first) is returned whatever the count,
        when the run has one: the reader compares its time with the one it
        holds. This default reads the whole ledger; the SQL stores and the
        memory store answer from the count.
        """
        steps = await self.load_stored_steps(run_id)
        generation = steps.get(GENERATION_KEY)
        mark = {} if generation is None else {GENERATION_KEY: generation.finished_at}
        if len(steps) == known:
            return known, mark
        return len(steps), mark | {
            k: s.finished_at for k, s in steps.items() if s.finished_at >= since
        }

    async def steps_by_key(
        self,
        run_id: str,
        keys: Collection[str],
        held: Mapping[str, StepRecord] | None = None,
    ) -> dict[str, StepRecord]:
        """The run's steps at ``keys`` that it has, whole, by key: only these
        are rebuilt. ``held`` (whole steps of the run the reader holds) are
        what their compact arguments (:mod:`stalwart.core.stepargs`) may
        refer to first, so a reader that holds the latest steps reads a new
        one for its own rows; a reference to a step neither read now nor
        held reads the run's steps as stored (one number and a key of new
        items a step, never every record rebuilt). An unreadable record is a
        :class:`~stalwart.core.errors.CorruptedRecord` naming the run and the step.
        """
        found = await self.stored_steps_by_key(run_id, keys)
        if not any(is_compact(s.args) for s in found.values()):
            return whole_steps(run_id, found)
        if held:
            try:
                return whole_steps(run_id, found, held)
            except CorruptedRecord:  # refers to a step not read now nor held: read them
                pass
        return whole_steps(run_id, found, await self.load_stored_steps(run_id))

    async def stored_steps_by_key(
        self, run_id: str, keys: Collection[str]
    ) -> dict[str, StoredStep]:
        """:meth:`steps_by_key`'s read, the records as stored. This default
        reads the whole ledger; the SQL stores and the memory store read the
        rows asked for."""
        steps = await self.load_stored_steps(run_id)
        return {k: steps[k] for k in keys if k in steps}

    @abc.abstractmethod
    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        """Record ``step`` unless its key has a record; return the record that won (S3).

        Every call checks the fence, the no-op case included: a writer whose
        fence is stale (or whose run is no longer running) gets
        :class:`~stalwart.core.errors.StaleLeaseError`, never the existing record,
        so a replaced worker learns it lost the run at its next step.
        """

    # -- signals -----------------------------------------------------------
    @abc.abstractmethod
    async def send_signal(
        self,
        run_id: str,
        name: str,
        payload: str,
        *,
        uid: str | None = None,
        once: bool = False,
        wait_fence: int | None = None,
    ) -> RunRecord:
        """Append to the run's mailbox; wake the run if it waits for ``name``.

        ``uid`` names this send: a send repeated with the same ``uid`` (a
        caller retrying after an unclear failure) is kept once, and is not
        refused when the run finished in between. Left out, each call is a
        new signal.

        ``once``: refuse the send, raising
        :class:`~stalwart.core.errors.SignalRefused`, when the run has had a
        signal of this name already, taken or not; checked and sent in one
        transaction, so of two such sends racing one is refused.

        ``wait_fence``: send only to the wait the sender saw open, else
        refuse (:class:`~stalwart.core.errors.SignalRefused`): the run must
        still be suspended waiting for ``name`` under that fence (the
        ``fence`` of the suspended run's record the sender read; a run that
        resumed and waits again holds a new one). The send that wakes the run
        is that wait's one answer; another racing it is refused, never kept
        for a later wait of the same name. Checked and sent in one
        transaction, as ``once`` is.
        """

    @abc.abstractmethod
    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        """The oldest unread signal ``name``, marked read by ``step_key``.

        Idempotent per step key: asking again for the same key returns the
        same payload, so a crash between taking and recording loses nothing.
        """

    # -- mailboxes (stalwart.core.mail, stalwart.core.engine.mailbox) ----------
    async def deliver_mail(
        self, run_id: str, envelope: str, uid: str, wakes: Sequence[str]
    ) -> Delivery:
        """Append a message to the run's mailbox, once per ``uid``, and wake
        the run if it waits for one of ``wakes`` (:func:`mail_wakes`).

        Returns ``"again"`` when ``uid`` was delivered before (a resumed
        sender: nothing is written), else ``"missing"`` (no such run),
        ``"finished"`` (the run ended: nothing is written) or ``"sent"``.
        Not abstract: a store without mailboxes says so when asked.
        """
        raise NotImplementedError(f"{type(self).__name__} has no mailboxes")

    async def take_mail(
        self, run_id: str, step_key: str, sender: str | None, kind: str | None
    ) -> str | None:
        """The oldest unread message of the run from ``sender`` of ``kind``
        (None: any), marked read by ``step_key``. Idempotent per step key, as
        :meth:`take_signal` is: a crash between taking and recording loses
        nothing."""
        raise NotImplementedError(f"{type(self).__name__} has no mailboxes")

    async def continue_run(
        self, run_id: str, fence: int, inputs: str, archive_id: str, first: StoredStep
    ) -> None:
        """Continue-as-new, all or nothing: a finished run ``archive_id``
        (:func:`archived_run`) takes the run's steps and the messages it read;
        the run keeps its id, its claim and its unread mailbox, gets
        ``inputs`` and the one step ``first``. Fenced; done again after a
        lost reply (``archive_id`` exists), it changes nothing."""
        raise NotImplementedError(f"{type(self).__name__} cannot continue runs as new")

    # -- moving runs between stores (stalwart.timetravel) --------------------
    async def export_run(self, run_id: str) -> RunDump | None:
        """The run, every step (large values included) and its signals, or
        None if there is no such run. Not abstract: a store that cannot
        export says so instead of breaking every other store subclass."""
        raise NotImplementedError(f"{type(self).__name__} cannot export runs")

    async def import_run(self, dump: RunDump) -> bool:
        """Insert ``dump`` in one transaction; False (nothing written) if its
        run id exists. Rows are inserted as given: the caller decides their
        status, owner and fence."""
        raise NotImplementedError(f"{type(self).__name__} cannot import runs")

    # -- values written again (stalwart.stores.encryption) ---------------------
    async def reseal(self, changes: Sequence[Reseal]) -> int:
        """Write each change's ``new`` text over its ``old`` text, in one
        transaction, only where the field still holds ``old`` (compare and
        set: a value changed in between is left as it is); how many changed.
        A spilled step value is rewritten where it lives (``payloads``).
        Not abstract: a store that cannot rewrite values says so."""
        raise NotImplementedError(f"{type(self).__name__} cannot rewrite values")

    async def park_run(self, seen: RunRecord, waiting_for: str) -> bool:
        """Take the unfinished run ``seen`` (as just read) away from every
        worker: if it is still at ``seen``'s fence and status, and no live
        worker is executing it (its lease expired or its holder is known
        dead), it becomes suspended waiting for ``waiting_for`` with no
        timer, and its fence is bumped, so no worker claims it and a former
        holder's writes are refused (S8). False (nothing written) if it
        changed since it was read or a live worker holds it. Not abstract: a
        store that cannot park runs says so."""
        raise NotImplementedError(f"{type(self).__name__} cannot park runs")

    # -- schedules (stalwart.schedules) ---------------------------------
    # Not abstract: a store that keeps no schedules says so instead of
    # breaking every other store subclass.
    async def create_schedule(self, schedule: ScheduleRecord) -> tuple[ScheduleRecord, bool]:
        """Insert ``schedule`` unless its name exists; the stored one and whether it is new."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep schedules")

    async def redefine_schedule(self, schedule: ScheduleRecord, retime: bool) -> bool:
        """Write ``schedule``'s definition over the one named so (its paused
        flag and last tick are kept); its ``next_at`` too only if ``retime``.
        False if there is no such schedule."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep schedules")

    async def get_schedule(self, name: str) -> ScheduleRecord | None:
        raise NotImplementedError(f"{type(self).__name__} cannot keep schedules")

    async def list_schedules(self, limit: int = 1000, check: bool = True) -> list[ScheduleRecord]:
        """Schedules by name, up to ``limit``. ``check=False`` returns the rows
        as stored, :func:`check_schedule` left to the caller, one at a time
        (``stalwart schedules list`` shows a corrupt row beside the others)."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep schedules")

    async def due_schedules(
        self, now: float, limit: int, after: tuple[Any, str] | None = None
    ) -> list[ScheduleRecord]:
        """Schedules not paused whose next tick is at or before ``now``, the
        most overdue first; with ``after`` (a ``(next_at, name)`` read
        before), only those that sort after it. Rows are decoded unchecked
        (:func:`check_schedule` is the caller's, one schedule at a time)."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep schedules")

    async def advance_schedule(
        self, name: str, expected: int, next_at: int, last_at: int | None
    ) -> bool:
        """Compare-and-set: move the schedule's next tick from ``expected``
        to ``next_at`` (recording ``last_at``), only if it is still at
        ``expected`` and not paused. Of workers racing on one tick exactly
        one gets True."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep schedules")

    async def pause_schedule(self, name: str, paused: bool, next_at: int | None) -> bool:
        """Pause or resume; a resume also sets the next tick. False if no such schedule."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep schedules")

    async def delete_schedule(self, name: str) -> bool:
        """Delete the schedule (its runs stay); False if there was none."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep schedules")

    # -- long-term memory (stalwart.core.memory) -------------------------------
    # Not abstract: a store that keeps no memory says so when asked. Values
    # arrive as JSON text, as step values do; namespaces as their JSON list.
    async def memory_put(self, record: MemoryRecord) -> None:
        """Insert or replace the row at ``(namespace, key)``, its first
        ``created_at`` kept (a write done again after a crash is one row)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    async def memory_insert(self, record: MemoryRecord) -> bool:
        """Insert the row at ``(namespace, key)`` unless there is one; whether
        it was inserted. Of writers racing for one key exactly one gets
        True: a claim (a dataset's next version) is made of it."""
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    async def memory_get(self, namespace: str, key: str) -> MemoryRecord | None:
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    async def memory_list(self, namespace: str, limit: int) -> list[MemoryRecord]:
        """The namespace's rows, most recently updated first (then by key)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    async def memory_search_text(
        self, namespace: str, words: Sequence[str], limit: int
    ) -> list[tuple[MemoryRecord, float]]:
        """The namespace's rows whose text holds any of ``words`` (plain
        lower-case words, :func:`~stalwart.core.memory.search_words`), best
        first, each with the store's score (higher is better)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    async def memory_namespaces(self, after: str, limit: int) -> list[str]:
        """Namespaces that hold rows (as a store keys them), in order, those
        after ``after`` ("" for the first), up to ``limit``: what a pass over
        every memory row pages through (key rotation)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    async def memory_vectors(self, namespace: str) -> list[MemoryRecord]:
        """The namespace's rows that have a vector, for the caller to score."""
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    async def memory_delete(self, namespace: str, key: str) -> bool:
        """Delete one row; whether there was one."""
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    async def memory_drop(self, namespace: str, keep_run: str | None = None) -> tuple[int, int]:
        """Delete the namespace's rows and mask the ledger's copies of them
        (:meth:`~stalwart.core.memory.Memory.drop`), in one transaction,
        except those of run ``keep_run`` (the run dropping it, which must
        replay what it read); how many rows went and how many step records
        were masked."""
        raise NotImplementedError(f"{type(self).__name__} keeps no memory")

    # -- versions (stalwart.stores.versions, stalwart.runner.routing) -------------
    # Not abstract: a store that keeps no versions says so when asked.
    async def beat_worker(self, worker: WorkerRecord) -> list[VersionRecord]:
        """Record that ``worker`` serves, as of its ``beat_at``; add its
        version to the known ones;
        forget workers silent for a day. Every known version, in the order
        first seen (none is the latest until :meth:`set_latest`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no versions")

    async def forget_worker(self, owner: str) -> None:
        """Mark ``owner``'s worker as stopped (no longer live; its row, which
        says what it could continue, stays until it is a day old)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no versions")

    async def list_workers(self) -> list[WorkerRecord]:
        """The workers that beat within the last day, by version then owner."""
        raise NotImplementedError(f"{type(self).__name__} keeps no versions")

    async def list_versions(self) -> list[VersionRecord]:
        """Every known version, in the order first seen."""
        raise NotImplementedError(f"{type(self).__name__} keeps no versions")

    async def set_latest(self, version: str) -> None:
        """New runs go to ``version`` (added if unknown, served again if retired)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no versions")

    async def retire_version(self, version: str) -> None:
        """``version`` serves no more (added if unknown; no longer the latest)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no versions")

    async def clear_run(
        self, run_id: str, versions: Sequence[str], fence: int | None = None
    ) -> RunRecord | None:
        """Add ``versions`` (code versions) to those the run is cleared for;
        the run as it now stands, None if there is no such run (or, with
        ``fence``, if it no longer has that fence: a worker took it since
        the caller read it, so steps the caller did not see may follow)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no versions")

    async def pin_run(
        self, run_id: str, code_version: str, fence: int | None = None
    ) -> RunRecord | None:
        """Set the run's ``code_version`` and drop its clearances, if it is
        unfinished (and, with ``fence``, still has that fence: its holder
        records the version that continues it). The run as it now stands,
        None if no unfinished run matched."""
        raise NotImplementedError(f"{type(self).__name__} keeps no versions")

    # -- wake-ups from other processes (stalwart.runner.worker) -----------------
    async def watch(self, wake: Callable[[str, str | None], None]) -> None:
        """Call ``wake(kind, queue)`` whenever another process may have
        changed something a runner waits for, until cancelled.

        ``kind`` is ``"ready"`` (a run became ready or got a timer: look for
        runs to claim; ``queue`` names its queue when the store knows it),
        ``"cancel"`` (a run was asked to stop: heartbeat now), ``"settled"``
        (a run finished: look at awaited outcomes), ``"any"`` (the store
        cannot tell which: all of these), ``"versions"`` (a version was named
        the latest or retired: a serving worker learns the versions now;
        never implied by ``"any"``, which a store may say at every commit),
        or ``"lost"`` (the store can no longer tell: the runner falls back on
        polling until the next call).
        What a wake-up says is a hint, never data to act on: the runner
        reads the store, the truth, before it does anything. The default
        returns at once, and a runner then polls every ``poll_interval``.
        """
        del wake

    def describe(self) -> dict[str, Any]:
        return {"url": self.url}
