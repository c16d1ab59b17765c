"""The memory store: the Store interface kept in this process's dicts.

``Runner()`` with no URL uses one, so a runner has one path for every run:
create, claim, execute, finish. It is *ephemeral*: nothing in it outlives the
process, so the engine records no steps into it (there is no later process to
replay them for, and an in-memory call stays a bare ``await``: B1), and waits
happen inline instead of suspending the run. Everything else (claims and
fences, signals, cancellation, queue limits, pruning) behaves as the SQL stores
do, which keeps the runner's memory and durable behaviour the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..core.errors import RunNotFound, SignalRefused, StaleLeaseError, StoreError
from ..core.ledger import TERMINAL, RunRecord, RunStatus, StoredStep
from ..core.mail import MAIL, Delivery, mail_filter, mail_matches
from ..core.memory import MemoryRecord
from .base import (
    CANCELLED_ERROR,
    Beat,
    RunDump,
    ScheduleRecord,
    SignalRecord,
    Store,
    children_prefix,
    ends_cancelled,
    not_waiting,
    owner_is_dead,
)
from .memory_memories import MemoryMemories
from .memory_reads import MemoryReads, has_tags
from .memory_schedules import MemorySchedules
from .memory_versions import MemoryVersions
from .versions import VersionRecord, WorkerRecord

__all__ = ["MemoryStore"]


class MemoryStore(MemoryReads, MemorySchedules, MemoryMemories, MemoryVersions, Store):
    """Runs, steps and signals in dicts, with the SQL stores' rules.

    Records are copied in and out, so a caller holding a ``RunRecord`` never
    sees it change under it, as with a database.
    """

    url = "memory"
    ephemeral = True

    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._steps: dict[str, dict[str, StoredStep]] = {}
        self._signals: dict[str, list[SignalRecord]] = {}
        # Delivery id -> the run whose mailbox holds it: a delivery checks its
        # id in one look, however much mail the store holds (ids are unique
        # store-wide, as the SQL stores' index makes them).
        self._uids: dict[str, str] = {}
        self._signal_uids: set[str] = set()
        # queue name -> [concurrency, rate, tokens, updated_at]
        self._queues: dict[str, list[Any]] = {}
        self._workers: dict[str, WorkerRecord] = {}
        self._versions: dict[str, VersionRecord] = {}
        self._schedules: dict[str, ScheduleRecord] = {}
        # Long-term memory: namespace -> key -> row.
        self._memory: dict[str, dict[str, MemoryRecord]] = {}

    # -- runs --------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        known = self._runs.get(run.id)
        if known is not None:
            return replace(known), False
        self._runs[run.id] = replace(run)
        return replace(run), True

    async def get_run(self, run_id: str) -> RunRecord | None:
        rec = self._runs.get(run_id)
        return None if rec is None else replace(rec)

    def _claimable(self, rec: RunRecord, owner: str, now: float, dead: bool) -> bool:
        if rec.cancel_requested:
            return False
        if rec.status == "pending":
            return rec.wake_at is None or rec.wake_at <= now
        if rec.status == "suspended":
            return rec.wake_at is not None and rec.wake_at <= now
        if rec.status == "running":
            return (rec.lease_expires_at or 0) < now or rec.owner == owner or dead
        return False

    def _take(self, rec: RunRecord, owner: str, lease: float, now: float) -> RunRecord:
        rec.owner = owner
        rec.lease_expires_at = now + lease
        rec.fence += 1
        rec.status = "running"
        rec.wake_at = None
        rec.waiting_for = None
        rec.updated_at = now
        return replace(rec)

    async def claim(self, run_id: str, owner: str, lease: float) -> RunRecord | None:
        rec = self._runs.get(run_id)
        now = time.time()
        if rec is None:
            return None
        dead = rec.status == "running" and owner_is_dead(rec.owner)
        if not self._claimable(rec, owner, now, dead):
            return None
        return self._take(rec, owner, lease, now)

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
        now = time.time()
        wanted = None if queues is None else set(queues)
        known = None if policies is None else set(policies)
        routes = None if versions is None else {"", *versions}

        def routed(r: RunRecord) -> bool:
            if routes is None:
                return True
            if r.status == "pending" and r.fence == 0:
                return fresh
            return r.code_version in routes or r.cleared is not None

        candidates = [
            r
            for r in self._runs.values()
            if (wanted is None or r.queue in wanted)
            and r.status not in TERMINAL
            # Abandoned runs asked to cancel are settled whatever their policy.
            and (((known is None or r.policy in known) and routed(r)) or r.cancel_requested)
        ]
        # Abandoned runs first, then ready ones by priority, oldest first.
        candidates.sort(key=lambda r: (r.status != "running", -r.priority, r.created_at))
        claimed: list[RunRecord] = []
        for rec in candidates:
            if len(claimed) >= limit:
                break
            dead = rec.status == "running" and rec.owner != owner and owner_is_dead(rec.owner)
            if rec.status == "running" and rec.cancel_requested:
                # Asked to cancel: if its holder went before it could stop, end it.
                abandoned = dead or rec.owner == owner or (rec.lease_expires_at or 0) < now
                if abandoned and ends_cancelled(replace(rec), owner, accept):
                    self._end(rec, "cancelled", None, CANCELLED_ERROR, now)
                continue
            if not self._claimable(rec, owner, now, dead) or not accept(replace(rec)):
                continue
            if rec.status != "running" and not self._queue_admits(rec, now):
                continue
            claimed.append(self._take(rec, owner, lease, now))
        return claimed

    def _queue_admits(self, rec: RunRecord, now: float) -> bool:
        """The queue's concurrency and rate limits (a token bucket) allow one more start."""
        limits = self._queues.get(rec.queue)
        if limits is None:
            return True
        concurrency, rate, tokens, updated = limits
        if concurrency is not None:
            busy = sum(
                1 for r in self._runs.values() if r.queue == rec.queue and r.status == "running"
            )
            if busy >= concurrency:
                return False
        if rate is not None and rec.status == "pending":
            tokens = min(max(rate, 1.0), tokens + (now - updated) * rate)
            limits[2], limits[3] = tokens, now
            if tokens < 1:
                return False
            limits[2] = tokens - 1
        return True

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("a queue's concurrency must be at least 1")
        if rate is not None and rate <= 0:
            raise ValueError("a queue's rate must be > 0 runs per second")
        known = self._queues.get(name)
        tokens = known[2] if known is not None else max(rate or 0.0, 1.0)
        self._queues[name] = [concurrency, rate, tokens, time.time()]

    async def create_runs(self, runs: Sequence[RunRecord]) -> list[RunRecord]:
        existed = [
            replace(self._runs[i]) for i in dict.fromkeys(r.id for r in runs) if i in self._runs
        ]
        for run in runs:
            self._runs.setdefault(run.id, replace(run))
        return existed

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        return [replace(self._runs[i]) for i in dict.fromkeys(run_ids) if i in self._runs]

    async def wake(self, run_id: str, waiting_for: str) -> None:
        rec = self._runs.get(run_id)
        if rec is not None and rec.status == "suspended" and rec.waiting_for == waiting_for:
            self._ready(rec, time.time())

    def _ready(self, rec: RunRecord, now: float) -> None:
        rec.status = "pending"
        rec.wake_at = None
        rec.waiting_for = None
        rec.updated_at = now

    def _unfinished(self, parent_id: str, prefix: str) -> int:
        return sum(
            1
            for r in self._runs.values()
            if r.parent_id == parent_id and r.id.startswith(prefix) and r.status not in TERMINAL
        )

    async def unfinished_children(self, parent_id: str, prefix: str) -> int:
        return self._unfinished(parent_id, prefix)

    async def heartbeat(self, owner: str, lease: float, run_ids: Sequence[str]) -> Beat:
        now = time.time()
        beat = Beat()
        for run_id in run_ids:
            rec = self._runs.get(run_id)
            if rec is None or rec.owner != owner or rec.status != "running":
                beat.lost.append(run_id)
                continue
            rec.lease_expires_at = now + lease
            if rec.cancel_requested:
                beat.cancel.append(run_id)
        return beat

    def _fenced(self, run_id: str, fence: int, running_only: bool = False) -> RunRecord:
        """The run a fenced write may change, or why not (S8)."""
        rec = self._runs.get(run_id)
        if rec is None:
            raise StoreError(f"run {run_id!r} is not in the store")
        if rec.fence != fence:
            raise StaleLeaseError(
                f"run {run_id!r}: fencing token {fence} is stale (now {rec.fence}); "
                "another worker has taken the run over"
            )
        if rec.status in TERMINAL:
            raise StaleLeaseError(f"run {run_id!r} has already finished ({rec.status})")
        if running_only and rec.status != "running":
            raise StaleLeaseError(f"run {run_id!r} is {rec.status}, not running here")
        return rec

    def _end(
        self, rec: RunRecord, status: RunStatus, result: str | None, error: str | None, now: float
    ) -> None:
        rec.status = status
        rec.result = result
        rec.error = error
        rec.owner = None
        rec.lease_expires_at = None
        rec.wake_at = None
        rec.waiting_for = None
        rec.updated_at = now

    async def finish_run(
        self, run_id: str, fence: int, status: RunStatus, result: str | None, error: str | None
    ) -> None:
        rec = self._fenced(run_id, fence)
        self._end(rec, status, result, error, time.time())

    async def suspend_run(
        self, run_id: str, fence: int, wake_at: float | None, waiting_for: str | None
    ) -> bool:
        rec = self._fenced(run_id, fence, running_only=True)
        now = time.time()
        ready = waiting_for is not None and any(
            s.name == waiting_for and s.consumed_by is None for s in self._signals.get(run_id, ())
        )
        prefix = children_prefix(waiting_for)
        if prefix is not None and not ready:
            ready = self._unfinished(run_id, prefix) == 0  # they may all be done by now
        mail = mail_filter(waiting_for)
        if mail is not None and not ready:  # a matching message may have come meanwhile
            ready = self._unread_mail(run_id, *mail) is not None
        rec.owner = None
        rec.lease_expires_at = None
        if ready:
            self._ready(rec, now)
            return False
        rec.status = "suspended"
        rec.wake_at = wake_at
        rec.waiting_for = waiting_for
        rec.updated_at = now
        return True

    async def release(self, run_id: str, fence: int) -> None:
        rec = self._runs.get(run_id)
        if rec is not None and rec.fence == fence and rec.status == "running":
            rec.status = "pending"
            rec.owner = None
            rec.lease_expires_at = None
            rec.updated_at = time.time()

    async def park_run(self, seen: RunRecord, waiting_for: str) -> bool:
        rec = self._runs.get(seen.id)
        now = time.time()
        if (
            rec is None
            or rec.fence != seen.fence
            or rec.status != seen.status
            or (
                rec.status == "running"
                and (rec.lease_expires_at or 0) >= now
                and not owner_is_dead(rec.owner)
            )
        ):
            return False
        rec.status = "suspended"
        rec.wake_at = None
        rec.waiting_for = waiting_for
        rec.owner = None
        rec.lease_expires_at = None
        rec.fence += 1
        rec.updated_at = now
        return True

    async def request_cancel(self, run_id: str) -> RunRecord | None:
        rec = self._runs.get(run_id)
        if rec is None:
            return None
        now = time.time()
        abandoned = rec.status == "running" and (
            (rec.lease_expires_at or 0) < now or owner_is_dead(rec.owner)
        )
        if rec.status in ("pending", "suspended") or abandoned:
            self._end(rec, "cancelled", None, CANCELLED_ERROR, now)
            rec.cancel_requested = True
        elif rec.status == "running":
            rec.cancel_requested = True
            rec.updated_at = now
        return replace(rec)

    async def next_wake(self) -> float | None:
        times = [
            r.wake_at
            for r in self._runs.values()
            if r.status in ("suspended", "pending") and r.wake_at is not None
        ]
        return min(times, default=None)

    async def prune(
        self,
        older_than: float | None = None,
        keep: int | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> int:
        if older_than is None and keep is None:
            raise ValueError("prune needs older_than or keep")

        def needed(rec: RunRecord) -> bool:
            # A finished child of an unfinished parent: the parent reads it on resume.
            parent = self._runs.get(rec.parent_id) if rec.parent_id else None
            return parent is not None and parent.status not in TERMINAL

        done = sorted(
            (
                r
                for r in self._runs.values()
                if r.status in TERMINAL and not needed(r) and (not tags or has_tags(r, tags))
            ),
            key=lambda r: r.updated_at,
            reverse=True,
        )
        gone: set[str] = set()
        if older_than is not None:
            gone.update(r.id for r in done if r.updated_at < older_than)
        if keep is not None:
            gone.update(r.id for r in done[keep:])
        for run_id in gone:
            del self._runs[run_id]
            self._steps.pop(run_id, None)
            self._drop_signals(run_id)
        return len(gone)

    # -- steps -------------------------------------------------------------
    async def load_stored_steps(self, run_id: str) -> dict[str, StoredStep]:
        return {k: replace(s) for k, s in self._steps.get(run_id, {}).items()}

    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        self._fenced(run_id, fence, running_only=True)
        steps = self._steps.setdefault(run_id, {})
        winner = steps.setdefault(step.key, replace(step))
        return replace(winner)

    # -- signals -----------------------------------------------------------
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
        rec = self._runs.get(run_id)
        if rec is None:
            raise RunNotFound(f"no run {run_id!r}")
        if uid is not None and uid in self._signal_uids:
            return replace(rec)  # sent already: this is a retry
        if rec.status in TERMINAL:
            raise StoreError(f"run {run_id!r} has finished ({rec.status}); it takes no signals")
        if once and any(sig.name == name for sig in self._signals.get(run_id, [])):
            raise SignalRefused(f"run {run_id!r} has had a signal {name!r} already")
        if wait_fence is not None and not (
            rec.status == "suspended" and rec.waiting_for == name and rec.fence == wait_fence
        ):
            raise SignalRefused(not_waiting(run_id, name, rec.status))
        self._signals.setdefault(run_id, []).append(SignalRecord(run_id, name, payload))
        if uid is not None:
            self._signal_uids.add(uid)
        if rec.status == "suspended" and rec.waiting_for == name:
            self._ready(rec, time.time())
        return replace(rec)

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        mailbox = self._signals.get(run_id, [])
        for sig in mailbox:
            if sig.consumed_by == step_key:
                return sig.payload
        for sig in mailbox:
            if sig.name == name and sig.consumed_by is None:
                sig.consumed_by = step_key
                return sig.payload
        return None

    # -- mailboxes -----------------------------------------------------------
    async def deliver_mail(
        self, run_id: str, envelope: str, uid: str, wakes: Sequence[str]
    ) -> Delivery:
        if uid in self._uids:
            return "again"
        rec = self._runs.get(run_id)
        if rec is None:
            return "missing"
        if rec.status in TERMINAL:
            return "finished"
        now = time.time()
        self._signals.setdefault(run_id, []).append(
            SignalRecord(run_id, MAIL, envelope, None, uid, now)
        )
        self._uids[uid] = run_id
        if rec.status == "suspended" and rec.waiting_for in wakes:
            self._ready(rec, now)
        return "sent"

    def _unread_mail(
        self, run_id: str, sender: str | None, kind: str | None
    ) -> SignalRecord | None:
        for sig in self._signals.get(run_id, ()):
            unread = sig.name == MAIL and sig.consumed_by is None
            if unread and mail_matches(sig.payload, sender, kind):
                return sig
        return None

    async def take_mail(
        self, run_id: str, step_key: str, sender: str | None, kind: str | None
    ) -> str | None:
        for sig in self._signals.get(run_id, ()):
            if sig.consumed_by == step_key:
                return sig.payload
        unread = self._unread_mail(run_id, sender, kind)
        if unread is None:
            return None
        unread.consumed_by = step_key
        return unread.payload

    # -- moving runs between stores ------------------------------------------
    async def export_run(self, run_id: str) -> RunDump | None:
        rec = self._runs.get(run_id)
        if rec is None:
            return None
        steps = [replace(s) for s in self._steps.get(run_id, {}).values()]
        return RunDump(replace(rec), steps, [replace(s) for s in self._signals.get(run_id, [])])

    async def import_run(self, dump: RunDump) -> bool:
        if dump.run.id in self._runs:
            return False
        self._runs[dump.run.id] = replace(dump.run)
        self._steps[dump.run.id] = {s.key: replace(s) for s in dump.steps}
        self._signals[dump.run.id] = [replace(s) for s in dump.signals]
        for sig in dump.signals:
            if sig.uid is not None:
                self._uids[sig.uid] = dump.run.id
        return True

    def forget(self, run_id: str) -> list[str]:
        """Delete a run and its child runs at once, whatever their status:
        for runs nobody can address any more (``Runner.run()`` without an id).
        Returns the ids deleted."""
        prefix = f"{run_id}~"
        gone = [i for i in self._runs if i == run_id or i.startswith(prefix)]
        for i in gone:
            del self._runs[i]
            self._steps.pop(i, None)
            self._drop_signals(i)
        return gone

    def _drop_signals(self, run_id: str) -> None:
        """Delete the run's signals and mail, their delivery ids with them."""
        for sig in self._signals.pop(run_id, ()):
            if sig.uid is not None and self._uids.get(sig.uid) == run_id:
                del self._uids[sig.uid]

    def describe(self) -> dict[str, Any]:
        return {"url": self.url, "runs": len(self._runs)}
