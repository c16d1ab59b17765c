"""The SQLite store's runs: create, read, list, finish, suspend, cancel, prune."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any

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
from ..sql import counts, fence_refusal
from ..sql.statements import run_rows
from .schema import INDEX_STALE
from .signals import unread_mail
from .writer import SQLiteBase

__all__ = ["SQLiteRuns"]


class SQLiteRuns(SQLiteBase):
    """Runs: each write is one short transaction, committed with any batched steps."""

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        row = run_to_row(run)

        def write(db: sqlite3.Connection) -> tuple[RunRecord, bool]:
            # A new run (every enqueue but a repeated one) is stored exactly
            # as given: one statement, no row to read back (B11).
            if db.execute(self.sql.create_run, row).rowcount == 1:
                if run.tags is not None:
                    db.execute(self.sql.insert_tags, (run.id, run.tags))
                return run, True
            found = db.execute(self.sql.get_run, (run.id,)).fetchall()
            return run_from_row(found[0]), False

        out: tuple[RunRecord, bool] = await self._write(write)
        return out

    async def create_runs(self, runs: Sequence[RunRecord]) -> list[RunRecord]:
        rows = run_rows(runs)
        if not rows:
            return []
        tagged = [(r.id, r.tags) for r in runs if r.tags is not None]

        def write(db: sqlite3.Connection) -> list[RunRecord]:
            # Fast path: insert all, and if every row went in, nothing existed
            # and no id needs looking up (a batch enqueue of new runs pays one
            # executemany). Otherwise undo it and find the existing ones first:
            # WITHOUT ROWID rows leave no trace of which were there before.
            db.execute("SAVEPOINT stalwart_runs")
            if db.executemany(self.sql.create_run, rows).rowcount == len(rows):
                db.execute("RELEASE stalwart_runs")
                if tagged:
                    db.executemany(self.sql.insert_tags, tagged)
                return []
            db.execute("ROLLBACK TO stalwart_runs")
            db.execute("RELEASE stalwart_runs")
            existed = self._existing(db, [r.id for r in runs])
            db.executemany(self.sql.create_run, rows)
            if tagged:
                old = {r.id for r in existed}
                db.executemany(self.sql.insert_tags, [t for t in tagged if t[0] not in old])
            return existed

        existed: list[RunRecord] = await self._write(write)
        return existed

    def _existing(self, db: sqlite3.Connection, ids: list[str]) -> list[RunRecord]:
        """The runs with these ids, read inside the caller's write transaction."""
        out: list[RunRecord] = []
        unique = list(dict.fromkeys(ids))
        for i in range(0, len(unique), 500):
            chunk = unique[i : i + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT {RUN_COLUMNS} FROM runs WHERE id IN ({marks})"
            out.extend(run_from_row(r) for r in db.execute(sql, chunk))
        return out

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(self.sql.get_run, (run_id,))
        return run_from_row(rows[0]) if rows else None

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        out: list[RunRecord] = []
        ids = list(run_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._read(f"SELECT {RUN_COLUMNS} FROM runs WHERE id IN ({marks})", chunk)
            out.extend(run_from_row(r) for r in rows)
        return out

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
        sql, params = self.sql.list_runs(
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
        return [run_from_row(r) for r in self._read(sql, params)]

    async def _index_stale_text(self) -> None:
        """Index the words of the runs created or changed since the last
        search (:data:`~.schema.INDEX_STALE`), if there are any."""
        if not self._read("SELECT 1 FROM run_text_stale LIMIT 1"):
            return

        def index(db: sqlite3.Connection) -> None:
            for statement in INDEX_STALE:
                db.execute(statement)

        await self._write(index)

    async def count_runs(
        self,
        *,
        queue: str | None = None,
        policy: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, dict[str, int]]:
        sql, params = self.sql.count_runs(queue=queue, policy=policy, tags=tags)
        return counts(self._read(sql, params))

    async def waiting_for_signals(self, limit: int = 100) -> list[RunRecord]:
        rows = self._read(self.sql.waiting_for_signals, (self.sql.children_wait, limit))
        return [run_from_row(r) for r in rows]

    async def wake(self, run_id: str, waiting_for: str) -> None:
        now = time.time()
        await self._write(lambda db: db.execute(self.sql.wake, (now, run_id, waiting_for)))

    async def unfinished_children(self, parent_id: str, prefix: str) -> int:
        rows = self._read(self.sql.unfinished_children, (parent_id, prefix))
        return int(rows[0][0])

    def _fenced(
        self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...], run_id: str, fence: int
    ) -> int:
        """Run a fenced update; on no row, raise why (a stale fence, a finished run)."""
        cur = db.execute(sql, params)
        if cur.rowcount == 0:
            refused = fence_refusal(
                run_id, fence, db.execute(self.sql.fence_status, (run_id,)).fetchone()
            )
            if refused is not None:
                raise refused
        return cur.rowcount

    async def finish_run(
        self, run_id: str, fence: int, status: str, result: str | None, error: str | None
    ) -> None:
        self._refuse_lost(run_id, fence, "ending the execution")
        params = (status, result, error, time.time(), run_id, fence)
        await self._write(lambda db: self._fenced(db, self.sql.finish, params, run_id, fence))

    async def suspend_run(
        self, run_id: str, fence: int, wake_at: float | None, waiting_for: str | None
    ) -> bool:
        self._refuse_lost(run_id, fence, "suspending the execution")
        now = time.time()

        def park(db: sqlite3.Connection) -> bool:
            ready = (
                waiting_for is not None
                and db.execute(self.sql.signal_unread, (run_id, waiting_for)).fetchone() is not None
            )
            prefix = children_prefix(waiting_for)
            if prefix is not None and not ready:
                # The children may all have finished since the run looked.
                (unfinished,) = db.execute(
                    self.sql.unfinished_children, (run_id, prefix)
                ).fetchone()
                ready = unfinished == 0
            mail = mail_filter(waiting_for)
            if mail is not None and not ready:  # a matching message may have come meanwhile
                ready = unread_mail(db, self.sql, run_id, *mail) is not None
            params = (
                "pending" if ready else "suspended",
                None if ready else wake_at,
                None if ready else waiting_for,
                now,
                run_id,
                fence,
            )
            self._fenced(db, self.sql.suspend, params, run_id, fence)
            return not ready

        parked: bool = await self._write(park)
        return parked

    async def release(self, run_id: str, fence: int) -> None:
        if self._lost.get(run_id) == fence:
            del self._lost[run_id]  # handed back: the next claim replays it
        now = time.time()
        await self._write(lambda db: db.execute(self.sql.release, (now, run_id, fence)))

    async def park_run(self, seen: RunRecord, waiting_for: str) -> bool:
        now = time.time()
        params = (waiting_for, now, seen.id, seen.fence, seen.status, now, dead_holder(seen))
        parked = await self._write(lambda db: db.execute(self.sql.park, params).rowcount)
        if parked:
            self._lost.pop(seen.id, None)  # whoever held it holds nothing now
        return bool(parked)

    async def request_cancel(self, run_id: str) -> RunRecord | None:
        now = time.time()
        current = await self.get_run(run_id)
        abandoned = (
            current is not None
            and current.status == "running"
            and ((current.lease_expires_at or 0) < now or owner_is_dead(current.owner))
        )

        def cancel(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE runs SET status = 'cancelled', error = ?, updated_at = ?, "
                "cancel_requested = 1, wake_at = NULL, waiting_for = NULL, owner = NULL, "
                "lease_expires_at = NULL "
                "WHERE id = ? AND (status IN ('pending', 'suspended') "
                "OR (status = 'running' AND ? AND fence = ?))",
                (CANCELLED_ERROR, now, run_id, int(abandoned), current.fence if current else -1),
            )
            db.execute(
                "UPDATE runs SET cancel_requested = 1, updated_at = ? "
                "WHERE id = ? AND status = 'running'",
                (now, run_id),
            )

        await self._write(cancel)
        return await self.get_run(run_id)

    async def next_wake(self) -> float | None:
        rows = self._read(self.sql.next_wake)
        return rows[0][0] if rows else None

    async def prune(
        self,
        older_than: float | None = None,
        keep: int | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> int:
        if older_than is None and keep is None:
            raise ValueError("prune needs older_than or keep")
        prunable, tagged = self.sql.prunable, self.sql.tag_filter(tags)
        prunable += tagged[0]

        def delete(db: sqlite3.Connection) -> int:
            ids: set[str] = set()
            if older_than is not None:
                ids.update(
                    run_id
                    for (run_id,) in db.execute(
                        f"SELECT id FROM runs WHERE {prunable} AND updated_at < ?",
                        (*tagged[1], older_than),
                    )
                )
            if keep is not None:
                ids.update(
                    run_id
                    for (run_id,) in db.execute(
                        f"SELECT id FROM runs WHERE {prunable} ORDER BY updated_at DESC, id "
                        "LIMIT -1 OFFSET ?",
                        (*tagged[1], keep),
                    )
                )
            for table, col in (
                ("steps", "run_id"),
                ("payloads", "run_id"),
                ("signals", "run_id"),
                ("run_tags", "run_id"),
                ("runs", "id"),
            ):
                db.executemany(f"DELETE FROM {table} WHERE {col} = ?", [(i,) for i in ids])
            return len(ids)

        count: int = await self._write(delete)
        return count
