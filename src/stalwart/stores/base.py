"""The Store interface: what the runtime needs from a durable ledger.

It is small on purpose. The runtime decides what to record and when; a store
only keeps rows in order, enforces that the first result of a step wins (S3),
refuses writes with a stale fencing token (S8), and answers a few queries.
Values arrive already serialized to JSON text, so a store never sees Python
objects and every store stores the same bytes.
"""

from __future__ import annotations

import abc
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import CorruptedRecord
from ..core.ledger import (
    CHILDREN_WAIT,
    RunRecord,
    RunStatus,
    StepRecord,
)

__all__ = [
    "Beat",
    "RunDump",
    "SignalRecord",
    "Store",
    "children_prefix",
    "owner_is_dead",
    "run_from_row",
    "run_to_row",
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
    "priority, parent_id, trace"
)
_RUN_FIELDS = tuple(c.strip() for c in RUN_COLUMNS.split(","))
SPILL_BYTES = 16 * 1024
SPILL_FIELDS = (("args", 1), ("output", 2), ("error", 4))
CANCELLED_ERROR = '{"type":"stalwart.errors.CancelledRun","message":"run was cancelled"}'


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


@dataclass(slots=True)
class RunDump:
    """One run as a store keeps it, spilled payloads merged back: what
    :meth:`Store.export_run` reads and :meth:`Store.import_run` writes, so a
    run moves between stores (``stalwart.timetravel``) byte for byte."""

    run: RunRecord
    steps: list[StepRecord]
    signals: list[SignalRecord]


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

    async def open(self) -> None:  # noqa: B027 - optional for stores
        """Connect and create or migrate the schema."""

    async def close(self) -> None:  # noqa: B027 - optional for stores
        """Release connections; pending group commits are flushed first."""

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
    ) -> list[RunRecord]:
        """Runs newest first, by ``(created_at, id)``, up to ``limit``.

        Filters combine: ``status``, ``queue`` and ``policy`` match exactly;
        ``id_contains`` is literal text found anywhere in the id (``%`` and
        ``_`` are plain characters); ``created_after <= created_at <
        created_before``. To page, pass as ``before`` the ``(created_at, id)``
        of the last run of the previous page: each page then costs its own
        rows however deep it is, where ``offset`` (kept for old callers)
        re-reads every row it skips.
        """

    @abc.abstractmethod
    async def count_runs(
        self, *, queue: str | None = None, policy: str | None = None
    ) -> dict[str, dict[str, int]]:
        """How many runs there are, as ``{status: {queue: count}}``.

        Only statuses and queues that have runs appear; ``queue`` and
        ``policy`` narrow what is counted. One query.
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
    ) -> list[RunRecord]:
        """Claim up to ``limit`` ready runs that ``accept`` approves: pending
        (and past their delayed start), woken (timer due or awaited signal
        arrived), or abandoned (lease expired, or holder known dead); only from
        ``queues`` when given, highest priority first, within each queue's
        concurrency and rate limits (:meth:`set_queue`)."""

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
    async def prune(self, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete finished runs finished before ``older_than`` (a timestamp) or
        beyond the ``keep`` most recent; return how many went (S12)."""

    # -- steps -------------------------------------------------------------
    @abc.abstractmethod
    async def load_steps(self, run_id: str) -> dict[str, StepRecord]: ...

    @abc.abstractmethod
    async def record_step(self, run_id: str, fence: int, step: StepRecord) -> StepRecord:
        """Record ``step`` unless its key has a record; return the record that won (S3).

        Every call checks the fence, the no-op case included: a writer whose
        fence is stale (or whose run is no longer running) gets
        :class:`~stalwart.core.errors.StaleLeaseError`, never the existing record,
        so a replaced worker learns it lost the run at its next step.
        """

    # -- signals -----------------------------------------------------------
    @abc.abstractmethod
    async def send_signal(self, run_id: str, name: str, payload: str) -> RunRecord:
        """Append to the run's mailbox; wake the run if it waits for ``name``."""

    @abc.abstractmethod
    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        """The oldest unread signal ``name``, marked read by ``step_key``.

        Idempotent per step key: asking again for the same key returns the
        same payload, so a crash between taking and recording loses nothing.
        """

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

    def describe(self) -> dict[str, Any]:
        return {"url": self.url}
