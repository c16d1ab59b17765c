"""The PostgreSQL store's runs: create, read, list, finish, suspend, cancel, prune."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import errors as pg_errors

from ...core.ledger import RunRecord
from ...core.mail import mail_filter
from ..base import (
    CANCELLED_ERROR,
    RUN_COLUMNS,
    children_prefix,
    dead_holder,
    owner_is_dead,
    run_from_row,
    run_to_row,
)
from ..sql import counts, quoted
from ..sql.statements import run_rows
from .connection import Conn, PostgresBase
from .schema import INDEX_STALE
from .signals import unread_mail
from .statements import NOW

__all__ = ["PostgresRuns"]

# Each run column's type, in RUN_COLUMNS order, as the runs table has it.
_RUN_TYPES = (
    "text", "text", "text", "text", "text", "text", "float8", "float8", "text", "float8",
    "text", "text", "float8", "int8", "bool", "text", "int4", "text", "text", "text",
    "text",
)  # fmt: skip
_RUN_NAMES = tuple(c.strip() for c in RUN_COLUMNS.split(","))
if len(_RUN_TYPES) != len(_RUN_NAMES):  # pragma: no cover
    raise ImportError("the runs table's column types no longer match RUN_COLUMNS")
_INSERTS: dict[tuple[str, tuple[bool, ...]], str] = {}  # (schema, which columns vary): SQL


def _insert_runs(schema: str, rows: Sequence[tuple[Any, ...]]) -> tuple[str, list[Any]]:
    """The INSERT of ``rows`` (new ids only, returning them) and its parameters.

    A column with one value in every row (a batch's queue, priority, code
    version, status and its NULLs) goes as one parameter; only the columns
    that vary (the id, the inputs, the times) go as binary arrays through
    ``unnest``. psycopg dumps an array element by element in Python, which
    was most of a batch enqueue's client time with all nineteen as arrays
    (B11). A value counts as the same only if it is equal and of the same
    type, so that no cast sees another type than the rows had.
    """
    n = len(rows)
    varies: list[bool] = []
    params: list[Any] = []
    for col in zip(*rows, strict=True):
        first = col[0]
        same = col.count(first) == n and len(set(map(type, col))) == 1
        varies.append(not same)
        params.append(list(col) if not same else first)
    if not any(varies):  # unnest needs an array: a batch of one sends its id as one
        varies[0] = True
        params[0] = [params[0]]
    key = (schema, tuple(varies))
    sql = _INSERTS.get(key)
    if sql is None:
        arrays = [f"%b::{t}[]" for t, v in zip(_RUN_TYPES, varies, strict=True) if v]
        names = [c for c, v in zip(_RUN_NAMES, varies, strict=True) if v]
        values = [
            f"u.{c}" if v else f"%b::{t}"
            for c, t, v in zip(_RUN_NAMES, _RUN_TYPES, varies, strict=True)
        ]
        sql = (
            f"INSERT INTO {schema}.runs ({RUN_COLUMNS}) SELECT {', '.join(values)} "
            f"FROM unnest({', '.join(arrays)}) AS u({', '.join(names)}) "
            "ON CONFLICT (id) DO NOTHING RETURNING id"
        )
        if len(_INSERTS) < 4096:
            _INSERTS[key] = sql
    # Parameters in the order their placeholders appear: the select list's
    # scalars first, then unnest's arrays.
    scalars = [p for p, v in zip(params, varies, strict=True) if not v]
    return sql, scalars + [p for p, v in zip(params, varies, strict=True) if v]


class PostgresRuns(PostgresBase):
    """Runs: each operation one round trip where it can, retried when transient."""

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        params = run_to_row(run)

        async def fn(conn: Conn, n: int) -> tuple[RunRecord, bool]:
            # A new run is stored exactly as given: no row comes back to
            # decode, the row count says whether it went in (B11).
            if run.tags is not None:  # the run and its tag rows, all or nothing
                async with conn.transaction():
                    cur = await conn.execute(self._sql.create_run, params)
                    if cur.rowcount == 1:
                        await conn.execute(self._sql.insert_tags, (run.id, run.tags))
                        return run, True
            else:
                cur = await conn.execute(self._sql.create_run, params)
                if cur.rowcount == 1:
                    return run, True
            cur = await conn.execute(self._sql.get_run, (run.id,))
            row = await cur.fetchone()
            if row is None:  # deleted between the two statements: try again
                raise pg_errors.SerializationFailure(f"run {quoted(run.id)} vanished while created")
            return run_from_row(row), False

        got = await self._with_conn(f"creating run {quoted(run.id)}", fn)
        if got[1]:
            self._announce("ready", run.queue)  # a new run: the workers may take it
        return got

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._fetchone(f"reading run {quoted(run_id)}", self._sql.get_run, (run_id,))
        return run_from_row(row) if row else None

    async def create_runs(self, runs: Sequence[RunRecord]) -> list[RunRecord]:
        rows = run_rows(runs)
        ids = list(dict.fromkeys(r.id for r in runs))

        async def fn(conn: Conn, n: int) -> list[RunRecord]:
            # One statement per thousand runs, all in one transaction; each
            # returns the ids it created, so the ones that existed are read
            # back only when there are some (never, for a batch of new runs).
            created: set[str] = set()
            async with conn.transaction():
                for i in range(0, len(rows), 1000):
                    sql, params = _insert_runs(self._sql.s, rows[i : i + 1000])
                    cur = await conn.execute(sql, params)
                    created.update(r[0] for r in await cur.fetchall())
                tagged = [(r.id, r.tags) for r in runs if r.tags is not None and r.id in created]
                if tagged:
                    async with conn.cursor() as tc:
                        await tc.executemany(self._sql.insert_tags, tagged)
                queues.update(r.queue for r in runs if r.id in created)
                missing = [i for i in ids if i not in created]
                if not missing:
                    return []
                cur = await conn.execute(
                    f"SELECT {RUN_COLUMNS} FROM {self._sql.s}.runs WHERE id = ANY(%s)", (missing,)
                )
                existed = [run_from_row(r) for r in await cur.fetchall()]
                if len(existed) != len(missing):  # pruned between the statements: again
                    raise pg_errors.SerializationFailure("runs vanished while created")
            return existed

        if not rows:
            return []
        queues: set[str] = set()  # of the runs created
        existed: list[RunRecord] = await self._with_conn(f"creating {len(rows)} runs", fn)
        for queue in queues:
            self._announce("ready", queue)
        return existed

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        rows = await self._fetchall(
            "reading runs",
            f"SELECT {RUN_COLUMNS} FROM {self._sql.s}.runs WHERE id = ANY(%s)",
            (list(run_ids),),
        )
        return [run_from_row(r) for r in rows]

    async def wake(self, run_id: str, waiting_for: str) -> None:
        now = time.time()

        async def fn(conn: Conn, n: int) -> str | None:
            cur = await conn.execute(self._sql.wake_returning, (now, run_id, waiting_for))
            row = await cur.fetchone()
            return None if row is None else str(row[0])

        queue = await self._with_conn(f"waking run {quoted(run_id)}", fn)
        if queue is not None:
            self._announce("ready", queue)

    async def unfinished_children(self, parent_id: str, prefix: str) -> int:
        row = await self._fetchone(
            f"counting the children of run {quoted(parent_id)}",
            self._sql.unfinished_children,
            (parent_id, prefix),
        )
        return int(row[0]) if row else 0

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
        if text is not None:
            await self._index_stale_text()
        sql, params = self._sql.list_runs(
            status=status,
            limit=limit,
            offset=offset,
            queue=queue,
            policy=policy,
            id_contains=id_contains,
            created_after=created_after,
            created_before=created_before,
            before=before,
            tags=tags,
            text=text,
        )
        return [run_from_row(r) for r in await self._fetchall("listing runs", sql, params)]

    async def _index_stale_text(self) -> None:
        """Index the words of the runs created or changed since the last
        search (:data:`~.schema.INDEX_STALE`), a batch a transaction, until
        none is left that another search is not indexing."""
        sql = INDEX_STALE.format(s=self._sql.s)

        async def fn(conn: Conn, n: int) -> int:
            async with conn.transaction():
                cur = await conn.execute(sql)
                row = await cur.fetchone()
            return 0 if row is None else int(row[0])

        while await self._with_conn("indexing the words of runs", fn):
            pass

    async def count_runs(
        self,
        *,
        queue: str | None = None,
        policy: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, dict[str, int]]:
        sql, params = self._sql.count_runs(queue=queue, policy=policy, tags=tags)
        return counts(await self._fetchall("counting runs", sql, params))

    async def waiting_for_signals(self, limit: int = 100) -> list[RunRecord]:
        rows = await self._fetchall(
            "listing runs waiting for signals",
            self._sql.waiting_for_signals,
            (self._sql.children_wait, limit),
        )
        return [run_from_row(r) for r in rows]

    async def finish_run(
        self, run_id: str, fence: int, status: str, result: str | None, error: str | None
    ) -> None:
        now = time.time()
        guard, token = self._guard(run_id, fence)

        async def fn(conn: Conn, n: int) -> None:
            await self._fenced(
                conn,
                self._sql.finish + guard,
                (status, result, error, now, run_id, fence),
                run_id,
                fence,
                token,
            )

        await self._with_conn(f"finishing run {quoted(run_id)}", fn)
        self._flushed(run_id, fence)
        self._announce("settled")  # for whoever awaits its outcome elsewhere

    async def suspend_run(
        self, run_id: str, fence: int, wake_at: float | None, waiting_for: str | None
    ) -> bool:
        now = time.time()
        guard, token = self._guard(run_id, fence)

        async def fn(conn: Conn, n: int) -> bool:
            async with conn.transaction():
                # Lock the run first: send_signal does too, so a signal either
                # arrives before this check or finds the run suspended and wakes it.
                await conn.execute(self._sql.status_locked, (run_id,))
                ready = False
                if waiting_for is not None:
                    cur = await conn.execute(self._sql.signal_unread, (run_id, waiting_for))
                    ready = await cur.fetchone() is not None
                prefix = children_prefix(waiting_for)
                if prefix is not None and not ready:
                    # The children may all have finished since the run looked;
                    # the row lock above orders this against their wake().
                    cur = await conn.execute(self._sql.unfinished_children, (run_id, prefix))
                    row = await cur.fetchone()
                    ready = row is not None and row[0] == 0
                mail = mail_filter(waiting_for)
                if mail is not None and not ready:  # a matching message may have come
                    ready = await unread_mail(conn, self._sql, run_id, *mail) is not None
                await self._fenced(
                    conn,
                    self._sql.suspend + guard,
                    (
                        "pending" if ready else "suspended",
                        None if ready else wake_at,
                        None if ready else waiting_for,
                        now,
                        run_id,
                        fence,
                    ),
                    run_id,
                    fence,
                    token,
                )
            return not ready

        parked = await self._with_conn(f"suspending run {quoted(run_id)}", fn)
        self._flushed(run_id, fence)
        if not parked or wake_at is not None:
            # Ready again, or with a timer the workers' next wake must include.
            self._announce("ready")
        return parked

    async def release(self, run_id: str, fence: int) -> None:
        now = time.time()

        async def fn(conn: Conn, n: int) -> str | None:
            cur = await conn.execute(self._sql.release_returning, (now, run_id, fence))
            row = await cur.fetchone()
            return None if row is None else str(row[0])

        queue = await self._with_conn(f"releasing run {quoted(run_id)}", fn)
        if queue is not None:
            self._announce("ready", queue)  # any worker may take it now
        # What a crash lost before this commit, the next execution's replay redoes.
        self._flushed(run_id, fence)

    async def park_run(self, seen: RunRecord, waiting_for: str) -> bool:
        now = time.time()
        params = (waiting_for, now, seen.id, seen.fence, seen.status, now, dead_holder(seen))

        async def fn(conn: Conn, n: int) -> int:
            cur = await conn.execute(self._sql.park, params)
            return cur.rowcount

        return bool(await self._with_conn(f"parking run {quoted(seen.id)}", fn))

    async def request_cancel(self, run_id: str) -> RunRecord | None:
        now = time.time()

        async def fn(conn: Conn, n: int) -> RunRecord | None:
            cur = await conn.execute(
                f"SELECT status, owner, fence, lease_expires_at < {NOW} "
                f"FROM {self._sql.s}.runs WHERE id = %s",
                (run_id,),
            )
            row = await cur.fetchone()
            if row is None:
                return None
            status, holder, fence, expired = row
            abandoned = status == "running" and (bool(expired) or owner_is_dead(holder))
            args = {"id": run_id, "now": now, "err": CANCELLED_ERROR}
            cur = await conn.execute(
                self._sql.cancel, {**args, "abandoned": abandoned, "fence": fence}
            )
            row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(self._sql.get_run, (run_id,))
                row = await cur.fetchone()
            return run_from_row(row) if row else None

        rec = await self._with_conn(f"cancelling run {quoted(run_id)}", fn)
        if rec is not None and rec.status == "cancelled":
            self._announce("settled")  # stopped here: tell whoever awaits it
        elif rec is not None and rec.status == "running":
            self._announce("cancel")  # its holder heartbeats now, and stops
        return rec

    async def next_wake(self) -> float | None:
        row = await self._fetchone(
            "reading the next wake time",
            self._sql.next_wake,
        )
        return None if row is None or row[0] is None else float(row[0])

    async def prune(
        self,
        older_than: float | None = None,
        keep: int | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> int:
        if older_than is None and keep is None:
            raise ValueError("prune needs older_than or keep")
        s = self._sql.s
        tagged, tag_params = self._sql.tag_filter(tags)
        terminal = self._sql.prunable + tagged
        arms: list[str] = []
        params: list[Any] = []
        if older_than is not None:
            arms.append("updated_at < %s")
            params.append(older_than)
        if keep is not None:
            arms.append(
                f"id IN (SELECT id FROM {s}.runs WHERE {terminal} "
                "ORDER BY updated_at DESC, id OFFSET %s)"
            )
            params += [*tag_params, keep]
        params = [*tag_params, *params]
        sql = f"""WITH doomed AS (
                SELECT id FROM {s}.runs WHERE {terminal} AND ({" OR ".join(arms)}) FOR UPDATE
            ), d_steps AS (
                DELETE FROM {s}.steps WHERE run_id IN (SELECT id FROM doomed)
            ), d_payloads AS (
                DELETE FROM {s}.payloads WHERE run_id IN (SELECT id FROM doomed)
            ), d_signals AS (
                DELETE FROM {s}.signals WHERE run_id IN (SELECT id FROM doomed)
            ), d_tags AS (
                DELETE FROM {s}.run_tags WHERE run_id IN (SELECT id FROM doomed)
            ), d_runs AS (
                DELETE FROM {s}.runs WHERE id IN (SELECT id FROM doomed) RETURNING 1
            ) SELECT count(*) FROM d_runs"""
        row = await self._fetchone("pruning runs", sql, params)
        return int(row[0]) if row else 0
