"""The PostgreSQL store's step records: first write wins (S3), in order (S6),
written in batches that adapt to the load (group commit).

A step record with nothing in flight is written at once by its caller: one
``INSERT ... SELECT ... FROM (VALUES ...)`` statement, one round trip, one
commit. Records that arrive while a write is in flight are written together
by the next statement (a writer task drains them; large batches travel as
one array per column); see the package's docstring for durability=group.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import psycopg

from ...core.errors import StaleLeaseError, StoreError, StoreUnavailable
from ...core.ledger import StoredStep
from ..sql import STEP, merge_payloads, quoted, spilled_values, split_spill, step_from_row
from ..sql.columns import KEYS_A_READ, count_and_positions, positions_args
from .connection import Conn, Pending, PostgresBase
from .schema import refused_for_good
from .statements import MAX_BATCH, MAX_ROUNDS, SMALL_BATCH, columns

__all__ = ["PostgresSteps"]

_SPILLED = STEP["spilled"]


@dataclass(slots=True)
class _Limit:
    """What a limited queue may still start in one claim."""

    left: float  # runs it may start (concurrency minus running)
    rate: float | None
    tokens: float  # starts of pending runs the rate allows now


def _row(p: Pending) -> tuple[Any, ...]:
    """The 13 values of ``p``'s row, in the order of ``PgStatements.record``."""
    step = p.step
    return (
        p.run_id,
        p.fence,
        step.key,
        step.name,
        step.kind,
        step.args_hash,
        p.args,
        p.output,
        p.error,
        step.attempts,
        step.started_at,
        step.finished_at,
        p.spilled,
    )


class PostgresSteps(PostgresBase):
    """Step records: written by their caller or batched by the writer task."""

    async def load_stored_steps(self, run_id: str) -> dict[str, StoredStep]:
        async def fn(conn: Conn, n: int) -> dict[str, StoredStep]:
            return await self._load_steps(conn, run_id, None)

        return await self._with_conn(f"reading the steps of run {quoted(run_id)}", fn)

    async def step_positions(
        self, run_id: str, known: int = -1, since: float = -math.inf
    ) -> tuple[int, dict[str, float]]:
        sql = self._sql

        async def fn(conn: Conn, n: int) -> tuple[int, dict[str, float]]:
            cur = await conn.execute(sql.step_positions, positions_args(run_id, known, since))
            return count_and_positions(await cur.fetchall())

        return await self._with_conn(f"reading where the steps of run {quoted(run_id)} sit", fn)

    async def stored_steps_by_key(
        self, run_id: str, keys: Collection[str]
    ) -> dict[str, StoredStep]:
        sql = self._sql
        wanted = list(dict.fromkeys(keys))

        async def fn(conn: Conn, n: int) -> dict[str, StoredStep]:
            steps: dict[str, StoredStep] = {}
            spilled: list[str] = []
            for at in range(0, len(wanted), KEYS_A_READ):
                chunk = wanted[at : at + KEYS_A_READ]
                cur = await conn.execute(sql.steps_by_keys(len(chunk)), (run_id, *chunk))
                for row in await cur.fetchall():
                    step = step_from_row(row)
                    steps[step.key] = step
                    if row[_SPILLED]:
                        spilled.append(step.key)
            for key in spilled:
                cur = await conn.execute(sql.payloads_by_key, (run_id, key))
                merge_payloads(steps, await cur.fetchall())
            return steps

        return await self._with_conn(f"reading steps of run {quoted(run_id)}", fn)

    async def _load_steps(self, conn: Conn, run_id: str, key: str | None) -> dict[str, StoredStep]:
        sql = self._sql
        if key is None:
            cur = await conn.execute(sql.steps_of_run, (run_id,))
        else:
            cur = await conn.execute(sql.step_by_key, (run_id, key))
        steps: dict[str, StoredStep] = {}
        spilled = False
        for row in await cur.fetchall():
            step = step_from_row(row)
            steps[step.key] = step
            spilled = spilled or bool(row[_SPILLED])
        if spilled:
            if key is None:
                cur = await conn.execute(sql.payloads_of_run, (run_id,))
            else:
                cur = await conn.execute(sql.payloads_by_key, (run_id, key))
            merge_payloads(steps, await cur.fetchall())
        return steps

    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        if self._pool is None:
            raise StoreError("the PostgreSQL store is not open")
        args, output, error, spilled = split_spill(step)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[StoredStep] = loop.create_future()
        self._pending.append(Pending(run_id, fence, step, args, output, error, spilled, fut))
        if self._writer is None and not self._leading:
            # Nothing in flight: write at once, in this task (no hop through
            # the writer task). Records arriving meanwhile queue for the next
            # batch, which the writer task takes over when we are done.
            self._leading = True
            batch, self._pending = self._pending, []
            try:
                await self._write_batch(batch)
            except BaseException as exc:
                self._fail(batch, exc)
                raise
            finally:
                self._leading = False
                if self._pending and self._writer is None:
                    self._writer = loop.create_task(self._write_steps(), name="stalwart-pg-steps")
        return await fut  # settled already, unless it was queued for the next batch

    def _fail(self, batch: list[Pending], exc: BaseException) -> None:
        if isinstance(exc, StoreError):
            err = exc
        elif isinstance(exc, Exception):
            err = StoreError(
                f"PostgreSQL at {self.where}: recording steps: {type(exc).__name__}: {exc}"
            )
        else:  # the writing task was cancelled: whether the batch landed is unknown
            err = StoreUnavailable(
                f"PostgreSQL at {self.where}: recording steps was interrupted "
                f"({type(exc).__name__})"
            )
        for p in batch:
            if not p.future.done():
                p.future.set_exception(err)
                p.future.exception()  # retrieved: the caller may be gone

    async def _write_steps(self) -> None:
        """Write pending step records, batch after batch, until none is left.

        Records that arrive while a batch is in flight make up the next one:
        the batch size adapts to the load with no timer and no added latency.
        """
        try:
            while self._pending:
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
                try:
                    await self._write_batch(batch)
                except BaseException as exc:
                    self._fail(batch, exc)
                    if not isinstance(exc, Exception):
                        raise
        finally:
            self._writer = None

    async def _write_batch(self, batch: list[Pending]) -> None:
        """Write ``batch`` (see :meth:`_write_together`); if the server
        refuses its statement for good, write it again in halves.

        One record PostgreSQL cannot take (a NUL in a step's name) fails the
        statement that carries it, and so every record batched with it, of
        other runs too; a run must not fail for a neighbour's bad record
        (S14). Halving isolates each bad record in a few statements more,
        paid only after a refusal: the hot path is unchanged.
        """
        try:
            await self._write_together(batch)
        except Exception as exc:
            if not refused_for_good(exc):
                raise
            if len(batch) == 1:
                p = batch[0]
                raise StoreError(
                    f"run {quoted(p.run_id)}: step {p.step.key} cannot be recorded: {exc}"
                ) from exc
            half = len(batch) // 2
            for part in (batch[:half], batch[half:]):
                try:
                    await self._write_batch(part)
                except Exception as part_exc:
                    self._fail(part, part_exc)

    async def _write_together(self, batch: list[Pending]) -> None:
        """Write ``batch`` in one statement, then settle each caller's future.

        A record that went in costs that one statement. One that did not is
        told apart afterwards, off the hot path (:meth:`_settle`): its fence
        is stale or its run no longer running, and it gets StaleLeaseError
        (S8) -- never the existing record, so a replaced worker learns at its
        next step that the run is gone -- or its key had a record, which wins
        (S3).

        **durability=group.** The step connection commits asynchronously: a
        record is acknowledged before it is flushed, so a crash of the server
        (or a failover) can lose the last records acknowledged. The WAL is
        ordered, so what is lost is a suffix of everything committed; but a
        run that went on writing on a new connection after the crash would
        have a hole in its ledger (S6). So every acknowledged record is
        noted, per run, with the server life it was acknowledged in (the
        token in the unlogged ``incarnation`` table, which crash recovery
        and a failover empty and a clean restart keeps). When the step
        connection comes back in another life, each run with records noted
        in the old one is marked lost: its writes under that fence fail with
        StoreUnavailable, so its runner drops it, and the run resumes by
        replay (a new claim, a new fence) from the prefix that survived.
        ``finish_run`` and ``suspend_run`` check the token in their own
        statement, so a run cannot end (and become final) on a ledger that
        lost records either. A synchronous commit after the records (the
        finish itself, a release, another claim) flushes them, which ends
        the risk for that run.
        """
        unique: list[Pending] = []
        later: list[Pending] = []  # a key twice in one batch: the first one decides
        if len(batch) == 1:  # the usual: one sequential run, nothing to sort out
            unique = batch
        else:
            seen: set[tuple[str, str]] = set()
            for p in batch:
                k = (p.run_id, p.step.key)
                if k in seen:
                    later.append(p)
                else:
                    seen.add(k)
                    unique.append(p)
            unique.sort(key=lambda p: p.run_id)  # lock runs in one order: no deadlocks
        sent: list[Pending] = []
        token: str | None = None

        async def attempt(n: int, deadline: float) -> list[tuple[Any, ...]]:
            nonlocal sent, token
            conn = await self._step_connection()
            token = self._token
            at_risk = self._lost or self._unsynced  # never with durability=commit
            sent = [p for p in unique if not self._doomed(p, token)] if at_risk else unique
            if not sent:
                return []
            # One cursor per step connection: it keeps its adapters between
            # records (only one batch is ever in flight on this connection).
            cur = self._step_cur
            if cur is None or cur.connection is not conn:
                cur = self._step_cur = conn.cursor()
            try:
                if len(sent) == 1 and not sent[0].spilled:
                    p = sent[0]
                    await cur.execute(self._sql.record_one, _row(p))
                    return [(p.run_id, p.step.key)] if cur.rowcount == 1 else []
                sql, params = self._statement(sent)
                await cur.execute(sql, params)
                return await cur.fetchall()
            except psycopg.Error:
                if conn.broken or conn.closed:
                    self._step_conn = None
                    with contextlib.suppress(Exception):
                        await conn.close()
                raise

        rows = await self._retrying("recording steps", attempt)
        inserted = {(run_id, key) for run_id, key in rows}
        held_back = set() if sent is unique else set(map(id, unique)) - set(map(id, sent))
        slow: list[Pending] = []
        for p in unique:
            if id(p) in held_back:
                slow.append(p)  # its execution may have lost records: _settle refuses it
            elif (p.run_id, p.step.key) in inserted:
                if token is not None:
                    self._acknowledged(p, token)
                if not p.future.done():
                    p.future.set_result(p.step)
            else:
                slow.append(p)
        for p in slow + later:
            try:
                won = await self._settle(p)
            except BaseException as exc:
                if not p.future.done():
                    p.future.set_exception(exc)
                    p.future.exception()  # retrieved: the caller may be gone
                if not isinstance(exc, Exception):
                    raise
            else:
                if won is not None:
                    if token is not None:
                        # Maybe our own first attempt, committed but not yet flushed.
                        self._acknowledged(p, token)
                    if not p.future.done():
                        p.future.set_result(won)
                elif p.rounds < MAX_ROUNDS:
                    p.rounds += 1
                    self._pending.append(p)  # nothing holds its key yet: next batch
                elif not p.future.done():
                    p.future.set_exception(
                        StoreError(
                            f"run {quoted(p.run_id)}: step {p.step.key} could not be recorded "
                            f"in {MAX_ROUNDS} tries, and nothing refused it"
                        )
                    )
                    p.future.exception()

    def _statement(self, sent: list[Pending]) -> tuple[str, list[Any]]:
        """The statement that records ``sent``, and its parameters."""
        rows = [_row(p) for p in sent]
        big = [
            (p.run_id, p.step.key, fld, data)
            for p in sent
            if p.spilled
            for fld, data in spilled_values(p.step, p.spilled)
        ]
        sql = self._sql.record(len(rows), bool(big))
        params: list[Any]
        if len(rows) > SMALL_BATCH:
            params = columns(rows, 13)
        else:
            params = [value for row in rows for value in row]
        if big:
            params += columns(big, 4)
        return sql, params

    def _doomed(self, p: Pending, token: str | None) -> bool:
        """Whether ``p``'s execution may have lost acknowledged records in a
        server crash (group mode): it must not write after the hole."""
        if self._lost.get(p.run_id) == p.fence:
            return True
        noted = self._unsynced.get(p.run_id)
        if noted is not None and noted[0] == p.fence and noted[1] != token:
            del self._unsynced[p.run_id]
            self._lost[p.run_id] = p.fence
            return True
        return False

    def _acknowledged(self, p: Pending, token: str) -> None:
        """Note that ``p`` was committed asynchronously in server life ``token``."""
        noted = self._unsynced.get(p.run_id)
        if noted is None or noted[0] != p.fence:
            self._unsynced[p.run_id] = (p.fence, token)

    async def _step_connection(self) -> Conn:
        conn = self._step_conn
        if conn is None or conn.closed or conn.broken:
            self._step_conn = None
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
            try:
                conn = await self._connect()
            except StoreUnavailable as exc:
                # Unreachable right now: let the retry loop try again.
                raise psycopg.OperationalError(str(exc)) from exc
            conn = await self._for_steps(conn)
            if self._closing:  # the store closed while we connected
                await conn.close()
                raise StoreError(f"the PostgreSQL store for {self.where} is closed")
            self._step_conn = conn
        return conn

    async def _settle(self, p: Pending) -> StoredStep | None:
        """What a record the statement did not insert gets: the error that
        refused it (a stale fence, a run no longer running), or else the
        record that holds its key (S3); None if its key is still free (it
        goes out again).

        The fence is read again here, after the statement: fences only grow,
        so one valid now was valid under the statement's share lock, and one
        stale now means the writer lost the run whatever the statement saw.
        """
        if self._lost.get(p.run_id) == p.fence:
            raise self._lost_error(p.run_id, f"step {p.step.key}")

        async def fn(conn: Conn, n: int) -> StoredStep | None:
            cur = await conn.execute(self._sql.fence_status, (p.run_id,))
            self._check_step_fence(p, await cur.fetchone())
            existing = (await self._load_steps(conn, p.run_id, p.step.key)).get(p.step.key)
            if existing is None:
                return None
            mine = p.step
            if (existing.output, existing.error, existing.args_hash, existing.name) == (
                mine.output,
                mine.error,
                mine.args_hash,
                mine.name,
            ):
                return mine  # our own record (a retry whose first attempt committed)
            return existing

        return await self._with_conn(f"reading step {p.step.key} of run {quoted(p.run_id)}", fn)

    def _check_step_fence(self, p: Pending, row: tuple[Any, ...] | None) -> None:
        """Raise StaleLeaseError unless the run (``fence, status``) is still
        running under ``p``'s fence."""
        what = f"run {quoted(p.run_id)}: step {p.step.key} refused"
        if row is None:
            raise StaleLeaseError(f"{what}: the run is no longer in the store")
        fence, status = row
        if fence == p.fence and status == "running":
            return
        # A takeover's commit (or the run's end) flushed this writer's records.
        noted = self._unsynced.get(p.run_id)
        if noted is not None and noted[0] == p.fence:
            del self._unsynced[p.run_id]
        if fence != p.fence:
            raise StaleLeaseError(
                f"{what}: fencing token {p.fence} is stale (now {fence}); "
                "another worker has taken the run over"
            )
        raise StaleLeaseError(f"{what}: the run is {status}, no longer running")
