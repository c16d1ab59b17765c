"""The SQLite store's signals: a mailbox per run, read once per step."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ...core.errors import RunNotFound, SignalRefused, StoreError
from ...core.ledger import TERMINAL, RunRecord, StoredStep
from ...core.mail import MAIL, Delivery, mail_matches
from ..base import archived_run, not_waiting, run_from_row, run_to_row, step_row
from ..sql import Statements, fence_refusal
from .writer import SQLiteBase

__all__ = ["SQLiteSignals", "unread_mail"]


def unread_mail(
    db: sqlite3.Connection, sql: Statements, run_id: str, sender: str | None, kind: str | None
) -> tuple[Any, str] | None:
    """The oldest unread message of the run that passes the filters: ``(id, envelope)``."""
    for sid, payload in db.execute(sql.mail_unread, (run_id, MAIL)):  # lazily: stop at one
        if mail_matches(payload, sender, kind):
            return sid, str(payload)
    return None


class SQLiteSignals(SQLiteBase):
    """Signals: appended with a ``uid``, taken once per step key."""

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
        new signal. ``once`` refuses a send of a name the run has had,
        ``wait_fence`` one to a wait no longer open
        (:class:`SignalRefused`), checked in the write that sends it.
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
            if once and db.execute(self.sql.signal_named, (run_id, name)).fetchone() is not None:
                raise SignalRefused(f"run {run_id!r} has had a signal {name!r} already")
            if wait_fence is not None:  # the write holds the lock: nothing comes between
                wait = db.execute(self.sql.wait_state, (run_id,)).fetchone()
                if tuple(wait) != ("suspended", name, wait_fence):
                    raise SignalRefused(not_waiting(run_id, name, str(row[0])))
            db.execute(self.sql.signal_insert, (uid, run_id, name, payload, now))
            db.execute(self.sql.wake, (now, run_id, name))

        await self._write(send)
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

        payload: str | None = await self._write(take)
        return payload

    # -- mailboxes (core/engine/mailbox.py) -------------------------------------
    async def deliver_mail(
        self, run_id: str, envelope: str, uid: str, wakes: Sequence[str]
    ) -> Delivery:
        now = time.time()

        def send(db: sqlite3.Connection) -> Delivery:
            if db.execute(self.sql.signal_sent, (uid,)).fetchone() is not None:
                return "again"  # a resumed sender: delivered before
            row = db.execute(self.sql.status_locked, (run_id,)).fetchone()
            if row is None:
                return "missing"
            if row[0] in TERMINAL:
                return "finished"
            db.execute(self.sql.signal_insert, (uid, run_id, MAIL, envelope, now))
            db.execute(self.sql.mail_wake, (now, run_id, *wakes))
            return "sent"

        status: Delivery = await self._write(send)
        return status

    async def take_mail(
        self, run_id: str, step_key: str, sender: str | None, kind: str | None
    ) -> str | None:
        def take(db: sqlite3.Connection) -> str | None:
            row = db.execute(self.sql.signal_taken, (run_id, step_key)).fetchone()
            if row is not None:
                return str(row[0])
            found = unread_mail(db, self.sql, run_id, sender, kind)
            if found is None:
                return None
            db.execute(self.sql.signal_consume, (step_key, found[0]))
            return found[1]

        payload: str | None = await self._write(take)
        return payload

    async def continue_run(
        self, run_id: str, fence: int, inputs: str, archive_id: str, first: StoredStep
    ) -> None:
        self._refuse_lost(run_id, fence, "continuing as new")
        now = time.time()

        def move(db: sqlite3.Connection) -> None:
            sql = self.sql
            refused = fence_refusal(
                run_id,
                fence,
                db.execute(sql.fence_status, (run_id,)).fetchone(),
                "continuing as new: ",
            )
            if refused is not None:
                raise refused
            if db.execute(sql.get_run, (archive_id,)).fetchone() is not None:
                return  # done before (a retry after a lost reply)
            run = run_from_row(db.execute(sql.get_run, (run_id,)).fetchone())
            db.execute(sql.create_run, run_to_row(archived_run(run, archive_id, now)))
            db.execute(sql.move_steps, (archive_id, run_id))
            db.execute(sql.move_payloads, (archive_id, run_id))
            db.execute(sql.move_read_signals, (archive_id, run_id))
            db.execute(sql.new_inputs, (inputs, now, run_id, fence))
            db.execute(sql.insert_step, step_row(run_id, first))

        await self._write(move)
