"""The SQLite store's signals: a mailbox per run, read once per step."""

from __future__ import annotations

import sqlite3
import time
import uuid

from ...core.errors import RunNotFound, StoreError
from ...core.ledger import TERMINAL, RunRecord
from .writer import SQLiteBase

__all__ = ["SQLiteSignals"]


class SQLiteSignals(SQLiteBase):
    """Signals: appended with a ``uid``, taken once per step key."""

    async def send_signal(
        self, run_id: str, name: str, payload: str, *, uid: str | None = None
    ) -> RunRecord:
        """Append to the run's mailbox; wake the run if it waits for ``name``.

        ``uid`` names this send: a send repeated with the same ``uid`` (a
        caller retrying after an unclear failure) is kept once, and is not
        refused when the run finished in between. Left out, each call is a
        new signal.
        """
        now = time.time()
        uid = uid or uuid.uuid4().hex

        def send(db: sqlite3.Connection) -> None:
            row = db.execute(self.sql.status_locked, (run_id,)).fetchone()
            if row is None:
                raise RunNotFound(f"no run {run_id!r}")
            if db.execute(self.sql.signal_sent, (uid,)).fetchone() is not None:
                return  # sent already: this is a retry
            if row[0] in TERMINAL:
                raise StoreError(f"run {run_id!r} has finished ({row[0]}); it takes no signals")
            db.execute(self.sql.signal_insert, (uid, run_id, name, payload, now))
            db.execute(self.sql.wake, (now, run_id, name))

        self._write_now(send)
        rec = await self.get_run(run_id)
        assert rec is not None
        return rec

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        def take(db: sqlite3.Connection) -> str | None:
            # Idempotent per step key: the signal this key took before, else
            # the oldest unread one, marked as taken by it.
            row = db.execute(self.sql.signal_taken, (run_id, step_key)).fetchone()
            if row is not None:
                return str(row[0])
            row = db.execute(
                "UPDATE signals SET consumed_by = ? WHERE id = (SELECT id FROM signals "
                "WHERE run_id = ? AND name = ? AND consumed_by IS NULL ORDER BY id LIMIT 1) "
                "RETURNING payload",
                (step_key, run_id, name),
            ).fetchone()
            return None if row is None else str(row[0])

        payload: str | None = self._write_now(take)
        return payload
