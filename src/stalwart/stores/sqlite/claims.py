"""The SQLite store's claims: who executes which run, within queue limits (S8)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from functools import partial

from ...core.ledger import RunRecord
from ..base import (
    CANCELLED_ERROR,
    RUN_COLUMNS,
    Beat,
    ends_cancelled,
    owner_is_dead,
    run_from_row,
    this_host,
)
from ..sql import QueueLimit, check_queue_limits, full_bucket
from .writer import SQLiteBase

__all__ = ["SQLiteClaims"]

_CLAIM = f"""UPDATE runs SET owner = ?, lease_expires_at = ?, fence = fence + 1,
        status = 'running', wake_at = NULL, waiting_for = NULL, updated_at = ?
    WHERE id = ? AND (? IS NULL OR fence = ?) AND NOT cancel_requested AND (
        (status = 'pending' AND (wake_at IS NULL OR wake_at <= ?))
        OR (status = 'suspended' AND wake_at IS NOT NULL AND wake_at <= ?)
        OR (status = 'running' AND (lease_expires_at < ? OR owner = ? OR owner = ?))
    ) RETURNING {RUN_COLUMNS}"""


class SQLiteClaims(SQLiteBase):
    """Claims: one process writes the file at a time, so a claim is a check
    and an update in one transaction; queue limits are checked run by run."""

    async def claim(self, run_id: str, owner: str, lease: float) -> RunRecord | None:
        now = time.time()
        rec = await self.get_run(run_id)
        if rec is None:
            return None
        dead = rec.owner if rec.status == "running" and owner_is_dead(rec.owner) else None
        got = await self._write(lambda db: self._claim(db, run_id, owner, lease, now, dead))
        if got is not None:
            self._lost.pop(run_id, None)  # a lost execution has a successor now
        return got

    def _claim(
        self,
        db: sqlite3.Connection,
        run_id: str,
        owner: str,
        lease: float,
        now: float,
        dead_owner: str | None,
        fence: int | None = None,
    ) -> RunRecord | None:
        """Claim the run; with ``fence``, only if it still has that fence."""
        row = db.execute(
            _CLAIM,
            (
                owner,
                now + lease,
                now,
                run_id,
                fence,
                fence,
                now,
                now,
                now,
                dead_owner or "\x00",
                owner,
            ),
        ).fetchone()
        return run_from_row(row) if row else None

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
        in_queues = ""
        queue_params: tuple[str, ...] = ()
        if queues is not None:
            in_queues = f" AND queue IN ({','.join('?' * len(queues))})"
            queue_params = tuple(queues)
        # Runs of policies the caller lacks are left out before the best few
        # are read, so they never crowd its own runs out; abandoned runs
        # asked to cancel are ended here whatever their policy.
        has_policy = ready_policy = ""
        policy_params: tuple[str, ...] = ()
        if policies is not None:
            marks = ",".join("?" * len(policies))
            has_policy = f" AND (policy IN ({marks}) OR cancel_requested)"
            ready_policy = f" AND policy IN ({marks})"
            policy_params = tuple(policies)
        # The same for runs of code versions the caller cannot continue (a
        # deploy's other version), and for new runs when it may not start them.
        routed = ""
        route_params: tuple[object, ...] = ()
        if versions is not None:
            marks = ",".join("?" * len(versions))
            routed = (
                " AND CASE WHEN status = 'pending' AND fence = 0 THEN ? ELSE "
                f"(code_version IN ({marks}) OR code_version = '' OR cleared IS NOT NULL) END"
            )
            route_params = (fresh, *versions)
        # Abandoned runs first (expired lease, our own after a store outage, or
        # a holder on this host that has exited), then ready ones by priority.
        # Holders on this host that exited, found first: listing every run of
        # every live holder instead would crowd the abandoned ones out.
        dead_holders = [
            holder
            for (holder,) in self._read(
                "SELECT DISTINCT owner FROM runs WHERE status = 'running' "
                "AND owner LIKE ? AND owner != ?",
                (f"{this_host()}:%", owner),
            )
            if owner_is_dead(holder)
        ]
        holders = (owner, *dead_holders)
        abandoned = self._read(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running' AND "
            f"(lease_expires_at < ? OR owner IN ({','.join('?' * len(holders))}))"
            f"{in_queues}{has_policy} AND (cancel_requested OR TRUE{routed}) LIMIT ?",
            (now, *holders, *queue_params, *policy_params, *route_params, limit * 4),
        )
        ready = self._read(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE NOT cancel_requested AND ("
            "(status = 'pending' AND (wake_at IS NULL OR wake_at <= ?)) "
            f"OR (status = 'suspended' AND wake_at <= ?)){in_queues}{ready_policy}{routed} "
            "ORDER BY priority DESC, created_at LIMIT ?",
            (now, now, *queue_params, *policy_params, *route_params, limit * 2),
        )
        claimed: list[RunRecord] = []
        for row in [*abandoned, *ready]:
            if len(claimed) >= limit:
                break
            rec = run_from_row(row)
            # Another's running run was read as abandoned: its lease ran out
            # or its holder has exited. The claim checks the lease again (a
            # holder may renew it meanwhile); only an exited holder is named.
            running = rec.status == "running" and rec.owner != owner
            dead = rec.owner if running and owner_is_dead(rec.owner) else None
            if rec.status == "running" and rec.cancel_requested:
                if ends_cancelled(rec, owner, accept):
                    await self._write(
                        partial(self._end_cancelled, rec=rec, owner=owner, now=now, dead=dead)
                    )
                continue
            if not accept(rec):
                continue
            got = await self._write(
                partial(self._claim_queued, rec=rec, owner=owner, lease=lease, now=now, dead=dead)
            )
            if got is not None:
                self._lost.pop(got.id, None)  # a lost execution has a successor now
                claimed.append(got)
        return claimed

    def _claim_queued(
        self,
        db: sqlite3.Connection,
        rec: RunRecord,
        owner: str,
        lease: float,
        now: float,
        dead: str | None,
    ) -> RunRecord | None:
        if rec.status != "running" and not self._within_limits(db, rec, now):
            return None
        # Claimed only as it was read (its fence): another worker may have
        # taken it since, recorded another code version and suspended it
        # again, and accept() approved the run it read, not that one.
        return self._claim(db, rec.id, owner, lease, now, dead, fence=rec.fence)

    def _end_cancelled(
        self, db: sqlite3.Connection, rec: RunRecord, owner: str, now: float, dead: str | None
    ) -> None:
        """Asked to cancel, and its holder went before it could stop: end it,
        if it is still abandoned (a holder may renew its lease meanwhile, as
        the claim checks too) and nobody took it since (its fence)."""
        db.execute(
            "UPDATE runs SET status = 'cancelled', error = ?, owner = NULL, "
            "lease_expires_at = NULL, wake_at = NULL, waiting_for = NULL, updated_at = ? "
            "WHERE id = ? AND fence = ? AND status = 'running' "
            "AND (lease_expires_at < ? OR owner = ? OR owner = ?)",
            (CANCELLED_ERROR, now, rec.id, rec.fence, now, dead or "\x00", owner),
        )

    def _within_limits(self, db: sqlite3.Connection, rec: RunRecord, now: float) -> bool:
        """Whether ``rec``'s queue lets it start now; a start of a pending run
        takes a token from the queue's bucket (written back in this
        transaction, so the next claim sees it)."""
        row = db.execute(
            "SELECT concurrency, rate, tokens, refilled_at FROM queues WHERE name = ?",
            (rec.queue,),
        ).fetchone()
        if row is None:
            return True  # a queue without limits has no row
        concurrency, rate, tokens, refilled_at = row
        running = 0
        if concurrency is not None:
            (running,) = db.execute(
                "SELECT count(*) FROM runs WHERE queue = ? AND status = 'running'", (rec.queue,)
            ).fetchone()
        limit = QueueLimit.of(concurrency, rate, tokens, refilled_at, running, now)
        admitted = limit.admits(rec.status)
        if admitted:
            limit.take(rec.status)
        if rate is not None and rec.status == "pending":
            db.execute(
                "UPDATE queues SET tokens = ?, refilled_at = ? WHERE name = ?",
                (limit.tokens, now, rec.queue),
            )
        return admitted

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        check_queue_limits(concurrency, rate)
        now = time.time()
        if concurrency is None and rate is None:
            await self._write(lambda db: db.execute(self.sql.queue_delete, (name,)))
            return
        params = (name, concurrency, rate, full_bucket(rate), now)
        await self._write(lambda db: db.execute(self.sql.queue_upsert, params))

    async def heartbeat(self, owner: str, lease: float, run_ids: Sequence[str]) -> Beat:
        now = time.time()
        ids = list(run_ids)

        def beat(db: sqlite3.Connection) -> Beat:
            found = Beat()
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                db.execute(
                    "UPDATE runs SET lease_expires_at = ? WHERE owner = ? "
                    f"AND status = 'running' AND id IN ({marks})",
                    (now + lease, owner, *chunk),
                )
                held = dict(
                    db.execute(
                        "SELECT id, cancel_requested FROM runs WHERE owner = ? "
                        f"AND status = 'running' AND id IN ({marks})",
                        (owner, *chunk),
                    ).fetchall()
                )
                found.cancel.extend(run_id for run_id, cancel in held.items() if cancel)
                found.lost.extend(run_id for run_id in chunk if run_id not in held)
            return found

        result: Beat = await self._write(beat)
        for run_id in result.lost:  # not ours to write any more
            self._lost.pop(run_id, None)
        return result
