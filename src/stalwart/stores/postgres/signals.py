"""The PostgreSQL store's signals: a mailbox per run, read once per step."""

from __future__ import annotations

import time
import uuid

from ...core.errors import RunNotFound, StoreError
from ...core.ledger import TERMINAL, RunRecord
from ..base import run_from_row
from ..sql import quoted
from .connection import Conn, PostgresBase

__all__ = ["PostgresSignals"]


class PostgresSignals(PostgresBase):
    """Signals: appended with a ``uid`` under the run's row lock, taken once per step key."""

    async def send_signal(
        self, run_id: str, name: str, payload: str, *, uid: str | None = None
    ) -> RunRecord:
        """Append to the run's mailbox; wake the run if it waits for ``name``.

        ``uid`` names this send: a send repeated with the same ``uid`` (this
        store's own retry after a lost reply, or a caller's) is kept once,
        and is not refused when the run finished in between. Left out, each
        call is a new signal.
        """
        now = time.time()
        uid = uid or uuid.uuid4().hex  # makes a retried send idempotent
        sql = self._sql

        async def fn(conn: Conn, n: int) -> RunRecord:
            async with conn.transaction():
                cur = await conn.execute(sql.status_locked, (run_id,))
                row = await cur.fetchone()
                if row is None:
                    raise RunNotFound(f"no run {quoted(run_id)}")
                cur = await conn.execute(sql.signal_sent, (uid,))
                if await cur.fetchone() is None:  # else sent already: this is a retry
                    if row[0] in TERMINAL:
                        raise StoreError(
                            f"run {quoted(run_id)} has finished ({row[0]}); it takes no signals"
                        )
                    await conn.execute(sql.signal_insert, (uid, run_id, name, payload, now))
                    await conn.execute(sql.wake, (now, run_id, name))
                cur = await conn.execute(sql.get_run, (run_id,))
                got = await cur.fetchone()
                assert got is not None
                return run_from_row(got)

        return await self._with_conn(f"sending signal {quoted(name)} to run {quoted(run_id)}", fn)

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        row = await self._fetchone(
            f"taking signal {quoted(name)} for run {quoted(run_id)}",
            self._sql.take_signal,
            {"run": run_id, "name": name, "key": step_key},
        )
        return None if row is None else str(row[0])
