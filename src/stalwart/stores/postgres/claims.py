"""The PostgreSQL store's claims: who executes which run, within queue limits (S8).

Claims are atomic conditional ``UPDATE``s; ``claim_due`` picks candidates
with ``SELECT ... FOR UPDATE SKIP LOCKED``, so two workers never receive the
same run and never wait for each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

import psycopg

from ...core.ledger import RunRecord
from ..base import (
    CANCELLED_ERROR,
    RUN_COLUMNS,
    Beat,
    ends_cancelled,
    owner_is_dead,
    run_from_row,
)
from ..sql import RUN, QueueLimit, check_queue_limits, full_bucket, quoted
from .connection import Conn, PostgresBase
from .statements import NOW

__all__ = ["PostgresClaims"]

# Where claim_due reads a candidate's columns, before it is worth a RunRecord.
_ID = RUN["id"]
_OWNER = RUN["owner"]
_CANCEL = RUN["cancel_requested"]
_PRIORITY = RUN["priority"]
_CREATED = RUN["created_at"]


class PostgresClaims(PostgresBase):
    """Claims: serialized per store (``_claiming``), ``SKIP LOCKED`` across workers."""

    #: Whether the last full claim pass found queue limits: until one finds
    #: none, passes are made the full way (the quick one cannot honour them).
    _queues_limited = False

    async def claim(self, run_id: str, owner: str, lease: float) -> RunRecord | None:
        now = time.time()

        async def fn(conn: Conn, n: int) -> RunRecord | None:
            # A run held by us but not live here (a claim whose reply was lost,
            # a store outage) is ours to take again, as on SQLite.
            args = {"id": run_id, "owner": owner, "lease": lease, "now": now, "owners": [owner]}
            cur = await conn.execute(self._sql.claim, args)
            row = await cur.fetchone()
            if row is not None:
                return run_from_row(row)
            cur = await conn.execute(
                f"SELECT status, owner FROM {self._sql.s}.runs WHERE id = %s", (run_id,)
            )
            held = await cur.fetchone()
            if held is None:
                return None
            status, holder = held
            if status != "running" or not owner_is_dead(holder):
                return None
            cur = await conn.execute(self._sql.claim, {**args, "owners": [owner, holder]})
            row = await cur.fetchone()
            return run_from_row(row) if row else None

        async with self._claiming:
            return await self._with_conn(f"claiming run {quoted(run_id)}", fn)

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
        wanted = None if queues is None else list(queues)
        known = [] if policies is None else list(policies)
        routes = [] if versions is None else list(versions)

        async def fn(conn: Conn, n: int) -> list[RunRecord]:
            now = time.time()
            args: dict[str, Any] = {
                "now": now,
                "owner": owner,
                "all": wanted is None,
                "queues": wanted or [],
                "any_policy": policies is None,
                "policies": known,
                "any_version": versions is None,
                "versions": routes,
                "fresh": fresh,
                "lease": lease,
                "n": max(limit, 1) * 2,
                "busy": [],
                "dry": [],
            }
            if not self._queues_limited:
                async with conn.transaction():
                    got = await self._claim_quick(conn, args, limit, accept, stopped)
                    if got is not None:
                        return got
                    raise psycopg.Rollback  # start over, the way that honours limits
            async with conn.transaction():
                limits = await self._queue_limits(conn, wanted, now)
                self._queues_limited = bool(limits)
                # Abandoned runs first: lease expired, ours but not live (a
                # lost reply, a store outage), or held by a dead process here.
                args["dead"] = [owner, *await self._dead_on_this_host(conn, owner)]
                args["busy"] = [q for q, lim in limits.items() if lim.left <= 0]
                args["dry"] = [q for q, lim in limits.items() if lim.left <= 0 or lim.tokens < 1]
                # Read them without locking (our own live runs are among them
                # and must not be locked against their own step records), then
                # lock the ones we want, checking again that they are abandoned.
                abandoned = await (await conn.execute(self._sql.abandoned, args)).fetchall()
                # Then ready runs, best first: pending ones (past any delayed
                # start) and suspended ones whose timer is due.
                ready = await (await conn.execute(self._sql.ready, args)).fetchall()
                return await self._take(
                    conn, args, abandoned, ready, limits, limit, accept, stopped
                )

        stopped: list[str] = []  # abandoned runs asked to cancel, cancelled here
        async with self._claiming:
            got = await self._with_conn("claiming ready runs", fn)
        if stopped:
            self._announce("settled")
        return got

    async def _claim_quick(
        self,
        conn: Conn,
        args: dict[str, Any],
        limit: int,
        accept: Callable[[RunRecord], bool],
        stopped: list[str],
    ) -> list[RunRecord] | None:
        """A claim pass in one read (``claim_read``) while no queue has limits:
        four round trips instead of seven, on the path of every wake-up.

        None, before ``accept`` has seen a run, when the pass must be made the
        full way: a queue it serves has limits now, or a process of this host
        that held runs has exited since the last pass (its runs were not read
        as abandoned).
        """
        owner = args["owner"]
        host = _host_of(owner)
        known = [h for h in self._dead_owners if h.startswith(host)]
        args["dead"] = [owner, *known]
        args["host"] = host
        rows = await (await conn.execute(self._sql.claim_read, args)).fetchall()
        abandoned: list[Any] = []
        ready: list[Any] = []
        for row in rows:
            kind, rest = row[0], row[1:]
            if kind == "l":
                self._queues_limited = True
                return None
            if kind == "o":
                holder = rest[_OWNER]
                if holder not in known and self._is_dead(holder):
                    return None  # died since its runs were read as live
            elif kind == "a":
                abandoned.append(rest)
            else:
                ready.append(rest)
        return await self._take(conn, args, abandoned, ready, {}, limit, accept, stopped)

    async def _take(
        self,
        conn: Conn,
        args: dict[str, Any],
        abandoned: list[Any],
        ready: list[Any],
        limits: dict[str, QueueLimit],
        limit: int,
        accept: Callable[[RunRecord], bool],
        stopped: list[str],
    ) -> list[RunRecord]:
        """The claim itself, in the caller's transaction: lock the abandoned
        runs ``accept`` wants, cancel those asked to stop, and take the best
        runs up to ``limit`` within the queues' ``limits``."""
        s, owner, now = self._sql.s, args["owner"], args["now"]
        wanted_ids = [
            rec.id
            for rec in map(run_from_row, abandoned)
            if (ends_cancelled(rec, owner, accept) if rec.cancel_requested else accept(rec))
        ][: max(limit, 1) * 2]
        rows: list[Any] = []
        if wanted_ids:
            args["ids"] = wanted_ids
            rows = await (await conn.execute(self._sql.abandoned_lock, args)).fetchall()
        ready.sort(key=lambda r: (-r[_PRIORITY], r[_CREATED]))
        take: list[str] = []
        cancel: list[str] = []
        for row in rows:
            if row[_CANCEL]:
                cancel.append(row[_ID])  # abandoned while asked to stop
            elif len(take) < limit:
                take.append(row[_ID])  # accepted above
        for row in ready:
            rec = run_from_row(row)
            if len(take) >= limit:
                break
            lim = limits.get(rec.queue)
            if lim is not None and not lim.admits(rec.status):
                continue
            if not accept(rec):
                continue
            take.append(rec.id)
            if lim is not None:
                lim.take(rec.status)
        if cancel:
            await conn.execute(
                f"UPDATE {s}.runs SET status = 'cancelled', error = %s, owner = NULL, "
                "lease_expires_at = NULL, wake_at = NULL, waiting_for = NULL, "
                "updated_at = %s WHERE id = ANY(%s)",
                (CANCELLED_ERROR, now, cancel),
            )
            stopped.extend(cancel)
        rated = [(q, lim.tokens) for q, lim in limits.items() if lim.rate is not None]
        if rated:
            await conn.execute(
                f"UPDATE {s}.queues q SET tokens = t.tokens, refilled_at = %s "
                "FROM unnest(%s::text[], %s::float8[]) AS t(name, tokens) "
                "WHERE q.name = t.name",
                (now, [q for q, _ in rated], [tk for _, tk in rated]),
            )
        if not take:
            return []
        cur = await conn.execute(
            f"UPDATE {s}.runs SET owner = %s, lease_expires_at = {NOW} + %s, "
            "fence = fence + 1, status = 'running', wake_at = NULL, waiting_for = NULL, "
            f"updated_at = %s WHERE id = ANY(%s) RETURNING {RUN_COLUMNS}",
            (owner, args["lease"], now, take),
        )
        got = {r[_ID]: run_from_row(r) for r in await cur.fetchall()}
        return [got[i] for i in take if i in got]

    async def _queue_limits(
        self, conn: Conn, queues: list[str] | None, now: float
    ) -> dict[str, QueueLimit]:
        """The limited queues among ``queues``, with what each may start now.

        Their rows stay locked until the claim commits, so workers claiming
        from one limited queue take turns and no limit is overshot; queues
        without limits cost one cheap read.
        """
        s = self._sql.s
        cur = await conn.execute(
            f"SELECT name, concurrency, rate, tokens, refilled_at FROM {s}.queues "
            "WHERE (%s OR name = ANY(%s)) ORDER BY name FOR UPDATE",
            (queues is None, queues or []),
        )
        rows = await cur.fetchall()
        if not rows:
            return {}
        running: dict[str, int] = {}
        limited = [name for name, concurrency, *_ in rows if concurrency is not None]
        if limited:
            cur = await conn.execute(
                f"SELECT queue, count(*) FROM {s}.runs WHERE status = 'running' "
                "AND queue = ANY(%s) GROUP BY queue",
                (limited,),
            )
            running = {q: int(c) for q, c in await cur.fetchall()}
        return {
            name: QueueLimit.of(concurrency, rate, tokens, refilled_at, running.get(name, 0), now)
            for name, concurrency, rate, tokens, refilled_at in rows
        }

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        check_queue_limits(concurrency, rate)
        now = time.time()

        async def fn(conn: Conn, n: int) -> None:
            if concurrency is None and rate is None:
                await conn.execute(self._sql.queue_delete, (name,))
                return
            await conn.execute(
                self._sql.queue_upsert, (name, concurrency, rate, full_bucket(rate), now)
            )

        await self._with_conn(f"limiting queue {quoted(name)}", fn)

    async def _dead_on_this_host(self, conn: Conn, me: str) -> list[str]:
        """Holders of running runs that are processes of this host known to have exited."""
        args = {"host": _host_of(me), "owner": me}
        cur = await conn.execute(self._sql.holders_here, args)
        return [holder for (holder,) in await cur.fetchall() if self._is_dead(holder)]

    def _is_dead(self, holder: str) -> bool:
        """Whether ``holder`` (a process of this host) has exited; remembered,
        as a process that exited stays dead."""
        if holder in self._dead_owners:
            return True
        if owner_is_dead(holder):
            self._dead_owners.add(holder)
            return True
        return False

    async def heartbeat(self, owner: str, lease: float, run_ids: Sequence[str]) -> Beat:
        if not run_ids:
            return Beat()
        rows = await self._fetchall(
            "extending leases", self._sql.heartbeat, (lease, owner, list(run_ids), owner)
        )
        held = dict(rows)  # id -> cancel_requested
        lost = [run_id for run_id in run_ids if run_id not in held]
        for run_id in lost:  # not ours to write any more: forget what we tracked
            self._unsynced.pop(run_id, None)
            self._lost.pop(run_id, None)
        return Beat(cancel=[run_id for run_id, cancel in held.items() if cancel], lost=lost)


def _host_of(owner: str) -> str:
    """The ``"host:"`` prefix of an owner ("host:pid:nonce")."""
    return owner.partition(":")[0] + ":"
