"""The PostgreSQL store's signals: a mailbox per run, read once per step."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg

from ...core.errors import RunNotFound, SignalRefused, StoreError
from ...core.ledger import TERMINAL, RunRecord, StoredStep
from ...core.mail import MAIL, Delivery, mail_matches
from ..base import archived_run, not_waiting, run_from_row, run_to_row, step_row
from ..sql import RUN, Statements, quoted
from .connection import Conn, PostgresBase

__all__ = ["PostgresSignals", "unread_mail"]

_QUEUE = RUN["queue"]


async def unread_mail(
    conn: Conn, sql: Statements, run_id: str, sender: str | None, kind: str | None
) -> tuple[Any, str] | None:
    """The oldest unread message of the run that passes the filters:
    ``(id, envelope)``. Call it holding the run's row lock (``status_locked``)."""
    cur = await conn.execute(sql.mail_unread, (run_id, MAIL))
    for sid, payload in await cur.fetchall():
        if mail_matches(payload, sender, kind):
            return sid, str(payload)
    return None


class PostgresSignals(PostgresBase):
    """Signals: appended with a ``uid`` under the run's row lock, taken once per step key."""

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

        ``uid`` names this send: a send repeated with the same ``uid`` (this
        store's own retry after a lost reply, or a caller's) is kept once,
        and is not refused when the run finished in between. Left out, each
        call is a new signal. ``once`` refuses a send of a name the run has
        had, ``wait_fence`` one to a wait no longer open
        (:class:`SignalRefused`), checked in the statement that sends it.
        """
        now = time.time()
        uid = uid or uuid.uuid4().hex  # makes a retried send idempotent
        args = {
            "run": run_id,
            "uid": uid,
            "name": name,
            "payload": payload,
            "now": now,
            "fence": wait_fence,
        }

        async def fn(conn: Conn, n: int) -> tuple[RunRecord, bool]:
            async with conn.transaction():
                # Lock the run in a statement of its own first: the statement
                # that inserts and wakes must take its snapshot after the lock,
                # or a suspend_run that committed while this send waited for
                # the lock is invisible to it, and the run is never woken.
                await conn.execute(self._sql.status_locked, (run_id,))
                statement = (
                    self._sql.send_signal_to_wait
                    if wait_fence is not None
                    else self._sql.send_signal_once
                    if once
                    else self._sql.send_signal
                )
                cur = await conn.execute(statement, args)
                row = await cur.fetchone()
            if row is not None and row[1]:
                # Committed, and it woke the run: tell the workers at once, on
                # this connection (as _announce would, without waiting for
                # another pooled connection and a task's turn). If that fails,
                # the usual way below tries again.
                try:
                    await conn.execute(
                        self._sql.announce, ([self._sql.channel["ready"]], [row[3 + _QUEUE]])
                    )
                except psycopg.Error:
                    pass
                else:
                    announced.append(True)
            if row is None:
                raise RunNotFound(f"no run {quoted(run_id)}")
            seen, woke, refused, *stored = row
            run = run_from_row(stored)
            if not seen and run.status in TERMINAL:
                raise StoreError(
                    f"run {quoted(run_id)} has finished ({run.status}); it takes no signals"
                )
            if refused and not seen and wait_fence is not None:
                raise SignalRefused(not_waiting(run_id, name, run.status))
            if refused and not seen:
                raise SignalRefused(f"run {quoted(run_id)} has had a signal {quoted(name)} already")
            return run, bool(woke)

        announced: list[bool] = []
        run, woke = await self._with_conn(
            f"sending signal {quoted(name)} to run {quoted(run_id)}", fn
        )
        if woke and not announced:
            self._announce("ready", run.queue)
        return run

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        row = await self._fetchone(
            f"taking signal {quoted(name)} for run {quoted(run_id)}",
            self._sql.take_signal,
            {"run": run_id, "name": name, "key": step_key},
        )
        return None if row is None else str(row[0])

    # -- mailboxes (core/engine/mailbox.py) -------------------------------------
    async def deliver_mail(
        self, run_id: str, envelope: str, uid: str, wakes: Sequence[str]
    ) -> Delivery:
        now = time.time()
        sql = self._sql
        woke: list[bool] = []  # whether the (last) attempt woke the run

        async def fn(conn: Conn, n: int) -> Delivery:
            async with conn.transaction():
                # The run's row lock orders this against suspend_run's check.
                cur = await conn.execute(sql.status_locked, (run_id,))
                row = await cur.fetchone()
                cur = await conn.execute(sql.signal_sent, (uid,))
                if await cur.fetchone() is not None:
                    return "again"  # a resumed sender, or our own retry
                if row is None:
                    return "missing"
                if row[0] in TERMINAL:
                    return "finished"
                await conn.execute(sql.signal_insert, (uid, run_id, MAIL, envelope, now))
                cur = await conn.execute(sql.mail_wake, (now, run_id, *wakes))
                woke.append(cur.rowcount > 0)
                return "sent"

        delivery = await self._with_conn(f"sending a message to run {quoted(run_id)}", fn)
        if woke and woke[-1]:
            self._announce("ready")  # the workers: the run it woke is ready
        return delivery

    async def take_mail(
        self, run_id: str, step_key: str, sender: str | None, kind: str | None
    ) -> str | None:
        sql = self._sql

        async def fn(conn: Conn, n: int) -> str | None:
            async with conn.transaction():
                await conn.execute(sql.status_locked, (run_id,))
                cur = await conn.execute(sql.signal_taken, (run_id, step_key))
                row = await cur.fetchone()
                if row is not None:
                    return str(row[0])
                found = await unread_mail(conn, sql, run_id, sender, kind)
                if found is None:
                    return None
                await conn.execute(sql.signal_consume, (step_key, found[0]))
                return found[1]

        return await self._with_conn(f"reading a message of run {quoted(run_id)}", fn)

    async def continue_run(
        self, run_id: str, fence: int, inputs: str, archive_id: str, first: StoredStep
    ) -> None:
        now = time.time()
        sql = self._sql
        guard, token = self._guard(run_id, fence)

        async def fn(conn: Conn, n: int) -> None:
            async with conn.transaction():
                cur = await conn.execute(sql.status_locked, (run_id,))
                await self._check_fence(conn, run_id, fence, "continuing as new: ")
                cur = await conn.execute(sql.get_run, (archive_id,))
                if await cur.fetchone() is not None:
                    return  # done before (a retry after a lost reply)
                cur = await conn.execute(sql.get_run, (run_id,))
                got = await cur.fetchone()
                assert got is not None
                run = run_from_row(got)
                await conn.execute(sql.create_run, run_to_row(archived_run(run, archive_id, now)))
                await conn.execute(sql.move_steps, (archive_id, run_id))
                await conn.execute(sql.move_payloads, (archive_id, run_id))
                await conn.execute(sql.move_read_signals, (archive_id, run_id))
                await self._fenced(
                    conn, sql.new_inputs + guard, (inputs, now, run_id, fence), run_id, fence, token
                )
                await conn.execute(sql.insert_step, step_row(run_id, first))

        await self._with_conn(f"continuing run {quoted(run_id)} as new", fn)
        self._flushed(run_id, fence)
