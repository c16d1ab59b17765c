"""The SQLite store's connection, its transactions, its step records, and
group commit (S6).

Every write goes through :meth:`SQLiteBase._begin` / :meth:`_write` on
the one connection; step records (:meth:`SQLiteBase.record_step`) join the
open transaction and are committed together (:meth:`_committed` says when).
The store's other modules (runs, claims, step reads, signals) are mixins of
this class and share its connection and its batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar
from urllib.parse import parse_qs, unquote, urlparse

from ...core.errors import StaleLeaseError, StoreError, StoreUnavailable
from ...core.ledger import StoredStep
from ..base import Store
from ..sql import (
    SQLITE,
    STEP,
    Statements,
    merge_payloads,
    spilled_values,
    split_spill,
    step_from_row,
)
from ..sql.provisioning import migrate_option, not_provisioned
from .paths import why_unopenable
from .schema import SCHEMA_VERSION, UNBINDABLE, ddl, is_busy, is_transient, prepare, stored_version

__all__ = ["SQLiteBase"]

T = TypeVar("T")

# The longest a run may go on committing inline without yielding to the loop.
_MAX_INLINE = 0.005

# How long SQLite's own busy handler may block the loop's thread on a locked
# file before :meth:`SQLiteBase._begin` takes over and waits with the loop
# free; and the longest pause between two of its attempts.
_BLOCKING_WAIT = 0.02
_MAX_LOCK_BACKOFF = 0.05

_SQL = Statements(SQLITE)
_INSERT_STEP = (
    "INSERT INTO steps (run_id, key, name, kind, args_hash, args, output, error, "
    "attempts, started_at, finished_at, spilled) "
    "SELECT ?,?,?,?,?,?,?,?,?,?,?,? WHERE EXISTS "
    "(SELECT 1 FROM runs WHERE id = ? AND fence = ? AND status = 'running') "
    "ON CONFLICT (run_id, key) DO NOTHING"
)
_INSERT_PAYLOAD = "INSERT INTO payloads (run_id, key, field, data) VALUES (?,?,?,?)"
_SPILLED = STEP["spilled"]


def _exists(path: str) -> bool:
    return Path(path).exists()


def _read_only(path: str) -> str:
    """A URI that opens ``path`` for reading, never creating or writing it."""
    return f"{Path(path).absolute().as_uri()}?mode=ro"


class SQLiteBase(Store):
    """The connection and the write path every part of the SQLite store uses."""

    sql = _SQL

    def __init__(
        self,
        path: str | Path,
        *,
        durability: str = "commit",
        synchronous: str = "NORMAL",
        group_delay: float = 0.005,
        busy_timeout: float = 10.0,
        migrate: bool = True,
    ) -> None:
        if durability not in ("commit", "group"):
            raise StoreError(f"durability must be 'commit' or 'group', not {durability!r}")
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA", "OFF"):
            raise StoreError(f"synchronous must be NORMAL, FULL, EXTRA or OFF, not {synchronous!r}")
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.durability = durability
        self.synchronous = synchronous.upper()
        self.group_delay = group_delay
        self.busy_timeout = busy_timeout
        # False (migrate=false): the operator creates and migrates the tables
        # (``stalwart store ddl``); open() only checks their version.
        self.migrate = migrate
        self._db: sqlite3.Connection | None = None
        self._in_tx = False
        self._waiting: list[asyncio.Future[None]] = []
        self._flush_handle: asyncio.Handle | asyncio.TimerHandle | None = None
        self._last_yield = 0.0
        # The task that committed inline in the current pass of the event loop, if
        # any (see _committed); reset by a callback at the next pass.
        self._inline: asyncio.Task[Any] | None = None
        self._pass_handle: asyncio.Handle | None = None
        self._contended = False
        # The step records in the open transaction (run, fence, record), to
        # write again if a neighbour's failure rolls it back (see _abort);
        # and per run, the fence of an execution whose records were lost.
        self._batch: list[tuple[str, int, StoredStep]] = []
        self._lost: dict[str, int] = {}

    @classmethod
    def from_url(cls, url: str) -> Self:
        """``sqlite:///relative.db``, ``sqlite:////abs/path.db``; options as query."""
        parsed = urlparse(url)
        path = unquote(parsed.netloc + parsed.path)
        if path.startswith("/") and not parsed.netloc:
            path = path[1:]  # sqlite:///x.db is the relative path x.db
        if not path:
            raise StoreError(f"no file in SQLite URL {url!r}; write sqlite:///path/to/file.db")
        opts = {k: v[-1] for k, v in parse_qs(parsed.query, keep_blank_values=True).items()}
        kwargs: dict[str, Any] = {}
        for key, value in opts.items():
            if key in ("durability", "synchronous"):
                kwargs[key] = value
            elif key in ("group_delay", "busy_timeout"):
                try:
                    kwargs[key] = float(value)
                except ValueError:
                    raise StoreError(f"{key} must be a number of seconds, not {value!r}") from None
            elif key == "migrate":
                kwargs[key] = migrate_option(value)
            else:
                raise StoreError(f"unknown SQLite store option {key!r} in {url!r}")
        return cls(path, **kwargs)

    # -- connection -------------------------------------------------------------
    async def open(self) -> None:
        if self._db is not None:
            return
        parent = Path(self.path).parent
        if not parent.exists():
            raise StoreError(f"cannot open SQLite store {self.path!r}: {parent} does not exist")
        if not self.migrate and not _exists(self.path):
            # Refused before sqlite3.connect would create the file.
            raise not_provisioned(f"SQLite store {self.path!r}", 0, SCHEMA_VERSION, self.url)
        try:
            db = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=min(self.busy_timeout, _BLOCKING_WAIT),
            )
        except sqlite3.Error as exc:
            raise self._open_error(exc) from exc
        try:
            await prepare(
                db,
                self.path,
                self.synchronous,
                self.busy_timeout,
                create=self.migrate,
                url=self.url,
            )
        except sqlite3.Error as exc:
            db.close()
            raise self._open_error(exc) from exc
        except BaseException:
            db.close()
            raise
        self._db = db

    async def ddl(self) -> str:
        """The SQL that brings the file's tables to the code's schema version
        (all of them for a missing file); the file is only read."""
        if not _exists(self.path):
            return ddl(0, self.path)
        try:
            db = sqlite3.connect(_read_only(self.path), uri=True)
        except sqlite3.Error as exc:
            raise self._open_error(exc) from exc
        try:
            found = stored_version(db)
        except sqlite3.Error as exc:
            raise self._error("cannot read its schema version", exc) from exc
        finally:
            db.close()
        return ddl(found, self.path)

    async def close(self) -> None:
        if self._db is None:
            return
        with contextlib.suppress(StoreError):
            self._flush()
        if self._pass_handle is not None:
            self._pass_handle.cancel()
            self._pass_handle = None
        self._db.close()
        self._db = None

    @property
    def db(self) -> sqlite3.Connection:
        """The open connection (for tests and tools that inspect the file)."""
        if self._db is None:
            raise StoreError("the SQLite store is not open")
        return self._db

    def _open_error(self, exc: sqlite3.Error) -> StoreError:
        """Why the file would not open: SQLite's words, and what the operating
        system says of the path (a directory, read-only, under /proc ...)."""
        why = why_unopenable(self.path)
        if why is None:
            return self._error("cannot open the file", exc)
        return StoreError(f"SQLite store {self.path!r}: cannot open the file: {why} ({exc})")

    def _error(self, doing: str, exc: sqlite3.Error) -> StoreError:
        """The store error for ``exc``: unavailable if a retry may succeed."""
        kind = StoreUnavailable if is_transient(exc) else StoreError
        return kind(f"SQLite store {self.path!r}: {doing}: {exc}")

    def _read(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[Any]:
        try:
            return self.db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._error("cannot read", exc) from exc

    # -- transactions -----------------------------------------------------------
    async def _begin(self) -> bool:
        """Open a write transaction unless one is open; whether this call opened it.

        Another process, or another store on the same file in this process,
        may hold the write lock. SQLite's busy handler would wait for it by
        sleeping on the event loop's thread: the loop would stop, and with it
        the other store's scheduled commit that would release the lock. So a
        busy file is waited for here, with the loop free, in jittered
        backoff, within ``busy_timeout``; SQLite's own handler is given
        ``_BLOCKING_WAIT`` only.
        """
        if self._in_tx:
            return False
        deadline = None
        pause = 0.001
        while True:
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                now = time.monotonic()
                deadline = deadline or now + self.busy_timeout
                if not is_busy(exc) or now + pause > deadline:
                    raise self._error("cannot begin a write", exc) from exc
            else:
                self._in_tx = True
                return True
            await asyncio.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, _MAX_LOCK_BACKOFF)
            if self._in_tx:  # another task of this store opened one meanwhile: join it
                return False

    def _flush(self) -> None:
        """Commit the open transaction and wake every step that waits for it."""
        self._flush_handle = None
        if self._in_tx:
            try:
                self.db.execute("COMMIT")
            except sqlite3.Error as exc:
                error = self._error("commit failed", exc)
                self._abort(error)
                raise error from exc
            finally:
                self._in_tx = False
        if self._batch:
            self._batch.clear()
        if not self._waiting:  # an inline commit (every sequential step): nobody to wake
            return
        waiting, self._waiting = self._waiting, []
        # A deferred batch: did several callers share it? (see _committed)
        self._contended = len(waiting) > 1
        for fut in waiting:
            if not fut.done():
                fut.set_result(None)

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a write transaction and commit it (with any batched steps).

        ``fn`` runs inside a savepoint: when it fails (a refused signal, a
        stale fence), only its own writes are undone, never the step records
        batched beside it that other runs were already told are recorded.
        In a transaction of its own there is nothing beside it, and the
        transaction is its own savepoint: two statements fewer a write (B11).
        """
        if await self._begin():
            return self._write_alone(fn)
        db = self.db
        try:
            db.execute("SAVEPOINT stalwart_write")
        except sqlite3.Error as exc:
            failed = self._error("cannot write", exc)
            self._abort(failed)
            raise failed from exc
        try:
            out = fn(db)
            db.execute("RELEASE stalwart_write")
        except BaseException as exc:
            error = self._error("cannot write", exc) if isinstance(exc, sqlite3.Error) else None
            if isinstance(exc, UNBINDABLE):
                error = StoreError(f"SQLite store {self.path!r}: cannot store a value: {exc}")
            try:
                db.execute("ROLLBACK TO stalwart_write")
                db.execute("RELEASE stalwart_write")
            except sqlite3.Error as undo:
                self._abort(error or self._error("cannot undo a refused write", undo))
            else:
                self._flush()  # the batched records are fine: commit them
            if error is not None:
                raise error from exc
            raise
        self._flush()
        return out

    def _write_alone(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`_write` in the transaction it has just opened: ``fn``
        alone in it, rolled back whole if it fails."""
        db = self.db
        try:
            out = fn(db)
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled it back
                db.execute("ROLLBACK")
            self._in_tx = False
            if isinstance(exc, sqlite3.Error):
                raise self._error("cannot write", exc) from exc
            if isinstance(exc, UNBINDABLE):
                raise StoreError(
                    f"SQLite store {self.path!r}: cannot store a value: {exc}"
                ) from exc
            raise
        self._flush()
        return out

    def _abort(self, cause: StoreError) -> None:
        """Roll the open transaction back, then write its step records again.

        A failed write (one run's large record meeting a full disk, a failed
        commit) can take the whole transaction with it: SQLite itself rolls
        it back on SQLITE_FULL. The records batched beside it, of other runs,
        are fine, and some were already acknowledged (``durability=group``)
        or their steps are waiting for this commit; the transaction holds
        nothing else, so they are written again in one of their own. If that
        fails too, the store is failing: the waiting steps get that error,
        and every execution with a record in the batch is marked lost, so
        that none writes past the hole its lost records leave (S6).
        """
        waiting, self._waiting = self._waiting, []
        batch, self._batch = self._batch, []
        if self._in_tx:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
            self._in_tx = False
        failure = self._rewrite(batch, cause)
        if failure is not None:
            for run_id, fence, _ in batch:
                self._lost[run_id] = fence
        for fut in waiting:
            if not fut.done():
                if failure is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(failure)

    def _rewrite(
        self, batch: list[tuple[str, int, StoredStep]], cause: StoreError
    ) -> StoreError | None:
        """Write ``batch`` again, all of it or none; the error if none."""
        if not batch:
            return None
        try:
            kept = self._insert_all(batch)
        except sqlite3.Error as exc:  # the values went in once: only the store can fail
            return self._error(f"{cause}; writing the batch beside it again failed", exc)
        if kept:
            return None
        return StoreUnavailable(
            f"{cause}; writing the batch beside it again was refused: "
            "a run in it changed hands meanwhile"
        )

    def _insert_all(self, batch: list[tuple[str, int, StoredStep]]) -> bool:
        """Insert every record of ``batch`` in one transaction and commit it,
        or roll it back if any is refused; whether it was committed."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            kept = all(self._insert(db, run_id, fence, step) for run_id, fence, step in batch)
            db.execute("COMMIT" if kept else "ROLLBACK")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        return kept

    def _insert(self, db: sqlite3.Connection, run_id: str, fence: int, step: StoredStep) -> bool:
        """Insert ``step`` (its large values apart) unless ``fence`` no longer
        holds the run or its key has a record; whether it went in."""
        args, output, error, spilled = split_spill(step)
        cur = db.execute(
            _INSERT_STEP,
            (
                run_id,
                step.key,
                step.name,
                step.kind,
                step.args_hash,
                args,
                output,
                error,
                step.attempts,
                step.started_at,
                step.finished_at,
                spilled,
                run_id,
                fence,
            ),
        )
        if cur.rowcount != 1:
            return False
        for fld, data in spilled_values(step, spilled) if spilled else ():
            db.execute(_INSERT_PAYLOAD, (run_id, step.key, fld, data))
        return True

    # -- step records: first write wins (S3), in order (S6) ----------------------
    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        if self._lost:
            self._refuse_lost(run_id, fence, f"step {step.key}")
        await self._begin()
        db = self.db
        try:
            if self._insert(db, run_id, fence, step):
                self._batch.append((run_id, fence, step))
                await self._committed()
                return step
            # Refused or already recorded: the rare path, which may cost a query.
            winner = self._winner(db, run_id, fence, step.key)
        except sqlite3.Error as exc:
            error = self._error(f"recording step {step.key} of run {run_id!r}", exc)
            self._abort(error)  # the step's row may be in without its payloads
            raise error from exc
        except UNBINDABLE as exc:
            error = StoreError(
                f"SQLite store {self.path!r}: step {step.key} of run {run_id!r} "
                f"cannot be stored: {exc}"
            )
            self._abort(error)
            raise error from exc
        except BaseException:
            self._end_unless_batched()  # a refused write: nothing of ours to undo
            raise
        self._end_unless_batched()
        return winner

    def _winner(self, db: sqlite3.Connection, run_id: str, fence: int, key: str) -> StoredStep:
        """The record already kept for ``key``, if ``fence`` still holds the run.

        A stale writer must not learn the new owner's results (it would go on
        executing the run's later steps as if it still held it): it is told
        that it lost the run instead.
        """
        row = db.execute(self.sql.fence_status, (run_id,)).fetchone()
        if row is None or tuple(row) != (fence, "running"):
            now = "gone" if row is None else "fence {}, {}".format(*row)
            raise StaleLeaseError(
                f"run {run_id!r}: step {key} refused, fencing token {fence} is stale (now {now})"
            )
        # The fence holds, in this very transaction: the insert was refused
        # because this row exists.
        found = db.execute(self.sql.step_by_key, (run_id, key)).fetchone()
        steps = {key: step_from_row(found)}
        if found[_SPILLED]:
            merge_payloads(steps, db.execute(self.sql.payloads_by_key, (run_id, key)))
        return steps[key]

    def _refuse_lost(self, run_id: str, fence: int, what: str) -> None:
        """Raise StoreUnavailable if this execution of the run lost records
        (see :meth:`_abort`): its runner drops it, and the run resumes by
        replay from the records that were committed."""
        if self._lost.get(run_id) == fence:
            raise StoreUnavailable(
                f"SQLite store {self.path!r}: run {run_id!r}: {what} refused: earlier records "
                "of this execution were rolled back with a failed write batched beside them "
                "and could not be written again; the run resumes by replay"
            )

    def _end_unless_batched(self) -> None:
        """Close the open transaction unless a scheduled commit will.

        A write that turned out to change nothing must not leave the file's
        write lock held until this process happens to write again.
        """
        if self._in_tx and self._flush_handle is None:
            self._flush()

    # -- group commit -----------------------------------------------------------
    async def _committed(self) -> None:
        """Wait until the batch holding our write is committed (or schedule it).

        When to commit inline, at once, in the caller's task, rather than
        defer the commit to the next pass of the event loop so that other records
        can join it (group commit, S6)? Asyncio has no public way to ask
        whether other tasks are ready, so the store watches its own callers
        instead. It commits inline when no batch is open (no step waits for
        a commit, none is scheduled), the caller has run for less than
        ``_MAX_INLINE`` since the store last deferred (so a long sequential
        run still yields to heartbeats and other runs), the store is not
        *contended*, and no other task committed inline in this pass of the
        event loop. Seeing another task's inline commit in the same pass (steps of
        a ``gather`` whose timers fired together) means records are arriving
        side by side: that record and the ones after it are deferred and
        share one commit, and the store is contended until a deferred batch
        holds one caller only, when inline commits resume. So concurrent
        steps share commits and runs stepping side by side take turns, as if
        the store saw the loop's ready queue, while one run's sequential
        steps commit inline, as before. The pass is marked by a
        ``call_soon`` callback that clears the mark when the loop comes
        round again: one handle per pass, none per step.
        """
        loop = asyncio.get_running_loop()
        if self.durability == "group":
            if self._flush_handle is None:
                self._flush_handle = loop.call_later(self.group_delay, self._flush_quietly)
            return
        now = time.monotonic()
        if (
            not self._contended
            and not self._waiting
            and self._flush_handle is None
            and now - self._last_yield < _MAX_INLINE
        ):
            task = asyncio.current_task()
            if self._inline is None or self._inline is task:
                self._flush()
                if self._pass_handle is None:
                    self._inline = task
                    self._pass_handle = loop.call_soon(self._next_pass)
                return
            self._contended = True  # another task's record came in this very pass
        self._last_yield = now
        fut: asyncio.Future[None] = loop.create_future()
        self._waiting.append(fut)
        if self._flush_handle is None:
            self._flush_handle = loop.call_soon(self._flush_quietly)
        await fut

    def _next_pass(self) -> None:
        self._inline = None
        self._pass_handle = None

    def _flush_quietly(self) -> None:
        with contextlib.suppress(StoreError):
            self._flush()  # errors reach the waiting steps through their futures
