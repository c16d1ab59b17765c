"""The statements only PostgreSQL runs: claims with ``SKIP LOCKED``, batched
step records as arrays, leases on the server's clock.

They extend the statements both stores share (:mod:`stalwart.stores.sql`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ..base import RUN_COLUMNS
from ..sql import FINISHED, RUN_FIELDS, Statements, postgres

__all__ = [
    "MAX_BATCH",
    "MAX_ROUNDS",
    "NOW",
    "SMALL_BATCH",
    "PgStatements",
    "channels",
    "columns",
]

# The server's clock, in seconds since the epoch, for leases.
NOW = "extract(epoch FROM clock_timestamp())::float8"
_STEP_ROW = (
    "(%s::text, %s::int8, %s::text, %s::text, %s::text, %s::text, %s::text, %s::text, "
    "%s::text, %s::int4, %s::float8, %s::float8, %s::int2)"
)
# Most step records written in one statement (PostgreSQL takes 65,535 parameters).
MAX_BATCH = 2000
# Batches up to this size are sent as scalars, larger ones as arrays.
SMALL_BATCH = 8
# Batches a record may go out in while its key stays free and nothing refuses
# it (the same key from a stale writer went first): a bound, not a loop.
MAX_ROUNDS = 3


def channels(schema: str) -> dict[str, str]:
    """The LISTEN/NOTIFY channel of each kind of wake-up, for the store in ``schema``.

    One set per schema, so stores sharing a database never wake each other.
    A name longer than PostgreSQL's 63 bytes would be refused by
    ``pg_notify``: a long schema is named by a hash of it instead (two
    schemas sharing a channel would only wake each other for nothing).
    """
    base = f"stalwart_{schema}"
    if len(base) > 52:
        base = f"stalwart_{hashlib.sha256(schema.encode()).hexdigest()[:24]}"
    return {kind: f"{base}_{kind}" for kind in ("ready", "cancel", "settled", "versions")}


def columns(rows: Sequence[Sequence[Any]], width: int) -> list[Any]:
    """Rows as one list per column, for ``unnest``."""
    return [[row[i] for row in rows] for i in range(width)]


class PgStatements(Statements):
    """The shared statements in PostgreSQL, with the ones only it has, built once."""

    def __init__(self, s: str) -> None:
        super().__init__(postgres(s))
        self.s = s
        self.claim = f"""UPDATE {s}.runs SET owner = %(owner)s,
                lease_expires_at = {NOW} + %(lease)s, fence = fence + 1, status = 'running',
                wake_at = NULL, waiting_for = NULL, updated_at = %(now)s
            WHERE id = %(id)s AND NOT cancel_requested AND (
                (status = 'pending' AND (wake_at IS NULL OR wake_at <= %(now)s))
                OR (status = 'suspended' AND wake_at IS NOT NULL AND wake_at <= %(now)s)
                OR (status = 'running'
                    AND (lease_expires_at < {NOW} OR owner = ANY(%(owners)s::text[])))
            ) RETURNING {RUN_COLUMNS}"""
        # claim_due's three candidate lists, each served by its own index.
        in_queues = "(%(all)s OR queue = ANY(%(queues)s::text[]))"
        # Only runs of the policies the worker has (``any_policy``: all), so
        # another policy's backlog never fills the few rows read: one more
        # array parameter, a filter on the rows each index scan returns.
        # Abandoned runs asked to cancel are settled here whatever their policy.
        has_policy = "(%(any_policy)s OR policy = ANY(%(policies)s::text[]))"
        # The same for runs of code versions the worker cannot continue (a
        # deploy's other version: ``any_version`` when it routes by none),
        # and for new runs when it may not start them (``fresh``).
        routed = (
            "(%(any_version)s OR CASE WHEN status = 'pending' AND fence = 0 THEN %(fresh)s "
            "ELSE (code_version = ANY(%(versions)s::text[]) OR code_version = '' "
            "OR cleared IS NOT NULL) END)"
        )
        self.abandoned = f"""SELECT {RUN_COLUMNS} FROM {s}.runs
            WHERE status = 'running'
              AND (lease_expires_at < {NOW} OR owner = ANY(%(dead)s::text[]))
              AND {in_queues} AND (({has_policy} AND {routed}) OR cancel_requested)
            LIMIT 4 * %(n)s"""
        self.abandoned_lock = f"""SELECT {RUN_COLUMNS} FROM {s}.runs
            WHERE id = ANY(%(ids)s::text[]) AND status = 'running'
              AND (lease_expires_at < {NOW} OR owner = ANY(%(dead)s::text[]))
            FOR UPDATE SKIP LOCKED"""
        self.pending = f"""SELECT {RUN_COLUMNS} FROM {s}.runs
            WHERE status = 'pending' AND NOT cancel_requested
              AND (wake_at IS NULL OR wake_at <= %(now)s)
              AND {in_queues} AND queue <> ALL(%(dry)s::text[]) AND {has_policy} AND {routed}
            ORDER BY priority DESC, created_at LIMIT %(n)s FOR UPDATE SKIP LOCKED"""
        self.woken = f"""SELECT {RUN_COLUMNS} FROM {s}.runs
            WHERE status = 'suspended' AND wake_at <= %(now)s AND NOT cancel_requested
              AND {in_queues} AND queue <> ALL(%(busy)s::text[]) AND {has_policy} AND {routed}
            ORDER BY priority DESC, created_at LIMIT %(n)s FOR UPDATE SKIP LOCKED"""
        # Both lists in one round trip (a claim pass is on the path of every
        # wake-up), each still locked, ordered and limited by its own index.
        self.ready = f"""SELECT * FROM ({self.pending}) AS p
            UNION ALL SELECT * FROM ({self.woken}) AS w"""
        # A claim pass where no queue has limits, in one round trip: the
        # abandoned runs (unlocked, as above), the ready ones (locked), the
        # other holders of running runs on this host (to tell the dead), and
        # whether any queue it serves has limits (then the pass starts over
        # with them). Each row leads with what it is: a, p, w, o or l.
        # Who else of this host holds running runs (``host`` is "host:"):
        # claims take the runs of those that exited (read on their own by
        # the full pass, within ``claim_read`` by the quick one).
        self.holders_here = f"""SELECT DISTINCT owner FROM {s}.runs
            WHERE status = 'running' AND starts_with(owner, %(host)s) AND owner <> %(owner)s"""
        owner_only = ", ".join("o.owner" if f == "owner" else "NULL" for f in RUN_FIELDS)
        nothing = ", ".join("NULL" for _ in RUN_FIELDS)
        self.claim_read = f"""SELECT 'a', * FROM ({self.abandoned}) AS a
            UNION ALL SELECT 'p', * FROM ({self.pending}) AS p
            UNION ALL SELECT 'w', * FROM ({self.woken}) AS w
            UNION ALL SELECT 'o', {owner_only} FROM ({self.holders_here}) AS o
            UNION ALL SELECT 'l', {nothing} FROM (SELECT 1 FROM {s}.queues
                WHERE (%(all)s OR name = ANY(%(queues)s::text[])) LIMIT 1) AS l"""
        # Lock in id order, as step records do, so the two never deadlock.
        self.heartbeat = f"""UPDATE {s}.runs SET lease_expires_at = {NOW} + %s
            WHERE id IN (SELECT id FROM {s}.runs WHERE owner = %s AND status = 'running'
                         AND id = ANY(%s) ORDER BY id FOR NO KEY UPDATE)
                AND owner = %s AND status = 'running'
            RETURNING id, cancel_requested"""
        # Pending and suspended runs stop at once, and so does a running run
        # whose holder is gone; a live holder is asked (its heartbeat sees it).
        stop = (
            "(status IN ('pending', 'suspended') "
            "OR (status = 'running' AND %(abandoned)s AND fence = %(fence)s))"
        )
        self.cancel = f"""UPDATE {s}.runs SET cancel_requested = true, updated_at = %(now)s,
                status = CASE WHEN {stop} THEN 'cancelled' ELSE status END,
                error = CASE WHEN {stop} THEN %(err)s ELSE error END,
                wake_at = CASE WHEN {stop} THEN NULL ELSE wake_at END,
                waiting_for = CASE WHEN {stop} THEN NULL ELSE waiting_for END,
                owner = CASE WHEN {stop} THEN NULL ELSE owner END,
                lease_expires_at = CASE WHEN {stop} THEN NULL ELSE lease_expires_at END
            WHERE id = %(id)s AND status IN ('pending', 'suspended', 'running')
            RETURNING {RUN_COLUMNS}"""
        self._records: dict[tuple[int, bool], str] = {}
        self._statements(s)
        self._notifying(s)

    def record(self, n: int, big: bool) -> str:
        """One statement that records ``n`` steps (and their spilled values).

        A row goes in only if its run still has the writer's fence, checked
        under a share lock (a claim bumping the fence waits for us, or we see
        its new fence), and only if its key has no record yet (the first
        result wins, S3). It returns the keys it inserted; why any other was
        left out is asked afterwards (``PostgresSteps._settle``), off the
        hot path. A small batch (the usual: one step) is sent as
        scalar parameters in a VALUES list; a large one as one array per
        column (see :func:`columns`), which the server parses far faster.
        """
        arrays = n > SMALL_BATCH
        sql = self._records.get((0 if arrays else n, big))
        if sql is not None:
            return sql
        s = self.s
        if arrays:
            rows = (
                "unnest(%s::text[], %s::int8[], %s::text[], %s::text[], %s::text[], "
                "%s::text[], %s::text[], %s::text[], %s::text[], %s::int4[], %s::float8[], "
                "%s::float8[], %s::int2[])"
            )
        else:
            rows = f"(VALUES {', '.join([_STEP_ROW] * n)})"
        sql = f"""INSERT INTO {s}.steps (run_id, key, name, kind, args_hash, args, output,
                error, attempts, started_at, finished_at, spilled)
            SELECT v.run_id, v.key, v.name, v.kind, v.args_hash, v.args, v.output, v.error,
                v.attempts, v.started_at, v.finished_at, v.spilled
            FROM {rows} AS v(run_id, fence, key, name, kind, args_hash, args, output,
                error, attempts, started_at, finished_at, spilled)
            WHERE EXISTS (SELECT 1 FROM {s}.runs r WHERE r.id = v.run_id AND r.fence = v.fence
                          AND r.status = 'running' FOR SHARE)
            ON CONFLICT (run_id, key) DO NOTHING
            RETURNING run_id, key"""
        if big:
            sql = f"""WITH ins AS ({sql}), big AS (
                    INSERT INTO {s}.payloads (run_id, key, field, data)
                    SELECT b.run_id, b.key, b.field, b.data
                    FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[])
                        AS b(run_id, key, field, data)
                    JOIN ins ON ins.run_id = b.run_id AND ins.key = b.key
                    ON CONFLICT DO NOTHING
                ) SELECT run_id, key FROM ins"""
        self._records[0 if arrays else n, big] = sql
        return sql

    @property
    def record_one(self) -> str:
        """:meth:`record` for one step with nothing spilled, without
        ``RETURNING``: the row count tells whether it went in, and the
        driver has no result row to read (the hot path of a sequential run)."""
        sql = self._records.get((-1, False))
        if sql is None:
            sql = self.record(1, False).rsplit("RETURNING", 1)[0].rstrip()
            self._records[-1, False] = sql
        return sql

    def _statements(self, s: str) -> None:
        # Idempotent per step key: the signal this key took before, else the
        # oldest unread one, marked as taken by it.
        self.take_signal = f"""WITH prev AS (
                SELECT payload FROM {s}.signals
                WHERE run_id = %(run)s AND consumed_by = %(key)s ORDER BY id LIMIT 1
            ), took AS (
                UPDATE {s}.signals SET consumed_by = %(key)s
                WHERE id = (SELECT id FROM {s}.signals
                            WHERE run_id = %(run)s AND name = %(name)s AND consumed_by IS NULL
                              AND NOT EXISTS (SELECT 1 FROM prev)
                            ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
                    AND consumed_by IS NULL
                RETURNING payload
            ) SELECT payload FROM prev UNION ALL SELECT payload FROM took"""

    def _notifying(self, s: str) -> None:
        """The statements of wake-ups (see :mod:`.listen`): the channels,
        the one statement that sends a batch of notifications, and the
        writes that return what a notification needs (a run's queue)."""
        self.channel = channels(s.strip('"'))
        # Sent after the writes they announce have committed, several at a
        # time, committed without waiting for the disk: PostgreSQL orders
        # notifying commits with a lock held through the commit, so a
        # pg_notify inside the writes themselves made every finishing worker
        # wait for the others' fsyncs (B6 fell by half). Lost in a server
        # crash, a notification costs a listener one poll, nothing more.
        self.announce = (
            "SELECT pg_notify(t.c, t.p), set_config('synchronous_commit', 'off', true) "
            "FROM unnest(%s::text[], %s::text[]) AS t(c, p)"
        )
        self.wake_returning = f"{self.wake} RETURNING queue"
        self.release_returning = f"{self.release} RETURNING queue"
        # A signal in one statement (one round trip, where it took seven):
        # the run locked first (as suspend_run locks it, so a signal either
        # lands before its check or finds it suspended and wakes it), the
        # signal kept unless its uid was seen (a retried send) or the run
        # finished, and the run woken if it waits for this name. It returns
        # whether the uid was seen, whether the run woke, whether a send
        # ``once`` was refused (the run had a signal of this name), then the
        # run as it now stands; no row means no such run.
        self.send_signal = self._send_signal(s, "SELECT 1 WHERE false")
        self.send_signal_once = self._send_signal(
            s, f"SELECT 1 FROM {s}.signals WHERE run_id = %(run)s AND name = %(name)s LIMIT 1"
        )
        self.send_signal_to_wait = self._send_signal(
            s,
            "SELECT 1 FROM r WHERE r.status IS DISTINCT FROM 'suspended' "
            "OR r.waiting_for IS DISTINCT FROM %(name)s OR r.fence IS DISTINCT FROM %(fence)s",
        )

    @staticmethod
    def _send_signal(s: str, dup: str) -> str:
        """The send_signal statement, refused when ``dup`` finds a row: for a
        send ``once``, a signal of the name the run has had; for a send to a
        wait (``wait_fence``), the run not waiting for the name under that
        fence. The run's lock, taken by a statement before this one, makes
        the check and the insert one step for concurrent senders."""
        return f"""WITH r AS (
                SELECT {RUN_COLUMNS} FROM {s}.runs WHERE id = %(run)s FOR UPDATE
            ), seen AS (
                SELECT 1 FROM {s}.signals WHERE uid = %(uid)s
            ), dup AS (
                {dup}
            ), ins AS (
                INSERT INTO {s}.signals (uid, run_id, name, payload, created_at)
                SELECT %(uid)s, r.id, %(name)s, %(payload)s, %(now)s FROM r
                WHERE r.status NOT IN {FINISHED} AND NOT EXISTS (SELECT 1 FROM seen)
                    AND NOT EXISTS (SELECT 1 FROM dup)
                ON CONFLICT (uid) DO NOTHING
                RETURNING run_id
            ), w AS (
                UPDATE {s}.runs SET status = 'pending', wake_at = NULL, waiting_for = NULL,
                    updated_at = %(now)s
                WHERE id IN (SELECT run_id FROM ins) AND status = 'suspended'
                    AND waiting_for = %(name)s
                RETURNING {RUN_COLUMNS}
            )
            SELECT EXISTS (SELECT 1 FROM seen), EXISTS (SELECT 1 FROM w),
                EXISTS (SELECT 1 FROM dup), u.*
            FROM (SELECT * FROM w UNION ALL SELECT * FROM r WHERE NOT EXISTS (SELECT 1 FROM w))
                AS u"""
