"""The embedded SQLite store: one file, WAL mode, any number of processes.

Writes run on the event loop's thread, through one connection per store, and
are cheap (tens of microseconds), so the thread hop of an executor would cost
more than the write. Step records are batched into the open transaction and
committed once the loop has run every task that was ready: a step's caller
resumes only after the commit (``durability=commit``, the default), yet
concurrent steps that finish together share one commit. With
``durability=group`` the caller does not wait; the commit follows within
``group_delay`` seconds, and a crash can lose that window's records (they are
re-executed on recovery: at least once, never a hole, S6). A failed write can
take the open transaction with it (SQLite rolls it back on a full disk); the
step records batched in it, other runs' included, are then written again, and
if the file cannot take them either, their executions are refused any later
write, so that each run resumes by replay from what was committed.

Every transaction that writes starts with ``BEGIN IMMEDIATE``, so that two
processes never deadlock on a lock upgrade; ``busy_timeout`` bounds how long a
write waits for another process's commit. No method returns with a
transaction open unless a commit of it is already scheduled, so this process
never holds the file's write lock while it is idle.

Errors are split by what a retry can do: a locked or busy file, or an I/O
error that may pass, raises :class:`~stalwart.core.errors.StoreUnavailable`; a
usage error or a broken file raises a plain :class:`~stalwart.core.errors.StoreError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlparse

from ..core.errors import RunNotFound, StaleLeaseError, StoreError, StoreUnavailable
from ..core.ledger import TERMINAL, RunRecord, StepRecord
from .base import (
    _HOST,
    CANCELLED_ERROR,
    RUN_COLUMNS,
    SPILL_BYTES,
    SPILL_FIELDS,
    Beat,
    Store,
    children_prefix,
    owner_is_dead,
    run_from_row,
    run_to_row,
)

__all__ = ["SQLiteStore"]

T = TypeVar("T")

SCHEMA_VERSION = 2

_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        policy TEXT NOT NULL,
        inputs TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        code_version TEXT NOT NULL DEFAULT '',
        wake_at REAL,
        waiting_for TEXT,
        owner TEXT,
        lease_expires_at REAL,
        fence INTEGER NOT NULL DEFAULT 0,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        queue TEXT NOT NULL DEFAULT 'default',
        priority INTEGER NOT NULL DEFAULT 0,
        parent_id TEXT
    );
    CREATE INDEX runs_by_status ON runs (status, wake_at);
    CREATE INDEX runs_by_owner ON runs (owner) WHERE owner IS NOT NULL;
    CREATE TABLE steps (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        args TEXT,
        output TEXT,
        error TEXT,
        attempts INTEGER NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL NOT NULL,
        spilled INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID;
    CREATE TABLE payloads (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        field TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, key, field)
    ) WITHOUT ROWID;
    CREATE TABLE signals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        payload TEXT NOT NULL,
        consumed_by TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX signals_by_run ON signals (run_id, name, consumed_by);
    """,
    2: """
    CREATE TABLE queues (
        name TEXT PRIMARY KEY,
        concurrency INTEGER,
        rate REAL,
        tokens REAL NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL DEFAULT 0
    );
    CREATE INDEX runs_by_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
    """,
}


# The longest a run may go on committing inline without yielding to the loop.
_MAX_INLINE = 0.005

# The longest pause between two attempts to prepare a file another process is
# preparing too.
_MAX_OPEN_BACKOFF = 0.05

_STEP_COLUMNS = (
    "key, name, args_hash, args, output, error, attempts, started_at, finished_at, kind, spilled"
)

# Primary result codes that say "not now" rather than "never": another
# connection holds a lock, the schema changed under a statement, memory or
# disk ran short, or the OS failed an I/O call. The same call may succeed later.
_TRANSIENT_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_SCHEMA,
    }
)


# What sqlite3 raises for a value it cannot bind (a lone surrogate in a text,
# an integer beyond 64 bits): the value is at fault, so retrying cannot help.
_UNBINDABLE = (UnicodeEncodeError, OverflowError)


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def _is_busy(exc: sqlite3.Error) -> bool:
    return _primary_code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _is_transient(exc: sqlite3.Error) -> bool:
    """Whether retrying may help. Errors the sqlite3 module raises itself
    (a closed connection, a value it cannot bind) carry no code: usage errors."""
    return _primary_code(exc) in _TRANSIENT_CODES


class SQLiteStore(Store):
    """A Store in one SQLite file. Build from a URL with :meth:`from_url`."""

    def __init__(
        self,
        path: str | Path,
        *,
        durability: str = "commit",
        synchronous: str = "NORMAL",
        group_delay: float = 0.005,
        busy_timeout: float = 10.0,
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
        self._db: sqlite3.Connection | None = None
        self._in_tx = False
        self._waiting: list[asyncio.Future[None]] = []
        self._flush_handle: asyncio.Handle | asyncio.TimerHandle | None = None
        self._last_yield = 0.0
        # The step records in the open transaction (run, fence, record), to
        # write again if a neighbour's failure rolls it back (see _abort);
        # and per run, the fence of an execution whose records were lost.
        self._batch: list[tuple[str, int, StepRecord]] = []
        self._lost: dict[str, int] = {}

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        """``sqlite:///relative.db``, ``sqlite:////abs/path.db``; options as query."""
        parsed = urlparse(url)
        path = unquote(parsed.netloc + parsed.path)
        if path.startswith("/") and not parsed.netloc:
            path = path[1:]  # sqlite:///x.db is the relative path x.db
        if not path:
            raise StoreError(f"no file in SQLite URL {url!r}; write sqlite:///path/to/file.db")
        opts = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        kwargs: dict[str, Any] = {}
        for key, value in opts.items():
            if key in ("durability", "synchronous"):
                kwargs[key] = value
            elif key in ("group_delay", "busy_timeout"):
                try:
                    kwargs[key] = float(value)
                except ValueError:
                    raise StoreError(f"{key} must be a number of seconds, not {value!r}") from None
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
        try:
            db = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_timeout,
            )
        except sqlite3.Error as exc:
            raise self._error("cannot open the file", exc) from exc
        try:
            await self._prepare(db)
        except BaseException:
            db.close()
            raise
        self._db = db

    async def _prepare(self, db: sqlite3.Connection) -> None:
        """Switch the file to WAL and migrate it, even while other processes
        open the same new file.

        SQLite refuses a journal-mode switch that meets another connection
        with SQLITE_BUSY at once, without waiting in its busy handler, so
        processes that open a brand-new file together would fail. Busy
        answers are retried with jittered backoff, within ``busy_timeout``.
        """
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(f"PRAGMA synchronous={self.synchronous}")
                db.execute("PRAGMA foreign_keys=OFF")
                self._migrate(db)
                return
            except sqlite3.Error as exc:
                if not _is_busy(exc) or time.monotonic() + pause > deadline:
                    raise self._error("cannot open the file", exc) from exc
            await asyncio.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, _MAX_OPEN_BACKOFF)

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("CREATE TABLE IF NOT EXISTS stalwart_schema (version INTEGER NOT NULL)")
            row = db.execute("SELECT max(version) FROM stalwart_schema").fetchone()
            current = row[0] or 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {current}, newer than this Stalwart "
                    f"({SCHEMA_VERSION}); upgrade stalwart"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO stalwart_schema (version) VALUES (?)", (version,))
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # keep the error that got us here
                db.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        if self._db is None:
            return
        with contextlib.suppress(StoreError):
            self._flush()
        self._db.close()
        self._db = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the SQLite store is not open")
        return self._db

    def _error(self, doing: str, exc: sqlite3.Error) -> StoreError:
        """The store error for ``exc``: unavailable if a retry may succeed."""
        kind = StoreUnavailable if _is_transient(exc) else StoreError
        return kind(f"SQLite store {self.path!r}: {doing}: {exc}")

    # -- transactions -----------------------------------------------------------
    def _begin(self) -> sqlite3.Connection:
        db = self.db
        if not self._in_tx:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._error("cannot begin a write", exc) from exc
            self._in_tx = True
        return db

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
        self._batch.clear()
        waiting, self._waiting = self._waiting, []
        for fut in waiting:
            if not fut.done():
                fut.set_result(None)

    def _write_now(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a write transaction and commit it (with any batched steps).

        ``fn`` runs inside a savepoint: when it fails (a refused signal, a
        stale fence), only its own writes are undone, never the step records
        batched beside it that other runs were already told are recorded.
        """
        db = self._begin()
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
            if isinstance(exc, _UNBINDABLE):
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
        self, batch: list[tuple[str, int, StepRecord]], cause: StoreError
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

    def _insert_all(self, batch: list[tuple[str, int, StepRecord]]) -> bool:
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

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self.db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._error("cannot read", exc) from exc

    # -- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        def insert(db: sqlite3.Connection) -> bool:
            cur = db.execute(
                f"INSERT INTO runs ({RUN_COLUMNS}) VALUES "
                "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING",
                run_to_row(run),
            )
            return cur.rowcount == 1

        created = self._write_now(insert)
        stored = await self.get_run(run.id)
        assert stored is not None
        return stored, created

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return run_from_row(rows[0]) if rows else None

    async def list_runs(
        self, status: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[RunRecord]:
        if status is None:
            rows = self._read(
                f"SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC LIMIT ? OFFSET ?",
                (limit, offset),
            )
        else:
            rows = self._read(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE status = ? "
                "ORDER BY created_at DESC LIMIT ? OFFSET ?",
                (status, limit, offset),
            )
        return [run_from_row(r) for r in rows]

    async def claim(self, run_id: str, owner: str, lease: float) -> RunRecord | None:
        now = time.time()
        rec = await self.get_run(run_id)
        if rec is None:
            return None
        dead = rec.owner if rec.status == "running" and owner_is_dead(rec.owner) else None
        got = self._write_now(lambda db: self._claim(db, run_id, owner, lease, now, dead))
        if got is not None:
            self._lost.pop(run_id, None)  # a lost execution has a successor now
        return got

    def _claim(
        self,
        db: sqlite3.Connection,
        run_id: str,
        owner: str,
        lease: float,
        now: float,
        dead_owner: str | None,
    ) -> RunRecord | None:
        row = db.execute(
            f"""UPDATE runs SET owner = ?, lease_expires_at = ?, fence = fence + 1,
                status = 'running', wake_at = NULL, waiting_for = NULL, updated_at = ?
            WHERE id = ? AND cancel_requested = 0 AND (
                (status = 'pending' AND (wake_at IS NULL OR wake_at <= ?))
                OR (status = 'suspended' AND wake_at IS NOT NULL AND wake_at <= ?)
                OR (status = 'running' AND (lease_expires_at < ? OR owner = ? OR owner = ?))
            ) RETURNING {RUN_COLUMNS}""",
            (owner, now + lease, now, run_id, now, now, now, dead_owner or "\x00", owner),
        ).fetchone()
        return run_from_row(row) if row else None

    async def claim_due(
        self,
        owner: str,
        lease: float,
        limit: int,
        accept: Callable[[RunRecord], bool],
        queues: Sequence[str] | None = None,
    ) -> list[RunRecord]:
        now = time.time()
        in_queues = ""
        qparams: tuple[str, ...] = ()
        if queues is not None:
            in_queues = f" AND queue IN ({','.join('?' * len(queues))})"
            qparams = tuple(queues)
        # Abandoned runs first (expired lease, our own after a store outage, or
        # a holder on this host that has exited), then ready ones by priority.
        # Holders on this host that exited, found first: listing every run of
        # every live holder instead would crowd the abandoned ones out.
        dead_holders = [
            holder
            for (holder,) in self._read(
                "SELECT DISTINCT owner FROM runs WHERE status = 'running' "
                "AND owner LIKE ? AND owner != ?",
                (f"{_HOST}:%", owner),
            )
            if owner_is_dead(holder)
        ]
        holders = (owner, *dead_holders)
        abandoned = self._read(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running' AND "
            f"(lease_expires_at < ? OR owner IN ({','.join('?' * len(holders))})){in_queues} "
            "LIMIT ?",
            (now, *holders, *qparams, limit * 4),
        )
        ready = self._read(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE cancel_requested = 0 AND ("
            "(status = 'pending' AND (wake_at IS NULL OR wake_at <= ?)) "
            f"OR (status = 'suspended' AND wake_at <= ?)){in_queues} "
            "ORDER BY priority DESC, created_at LIMIT ?",
            (now, now, *qparams, limit * 2),
        )
        claimed: list[RunRecord] = []
        for row in [*abandoned, *ready]:
            if len(claimed) >= limit:
                break
            rec = run_from_row(row)
            dead = None
            if rec.status == "running" and rec.owner != owner:
                if (rec.lease_expires_at or 0) >= now and not owner_is_dead(rec.owner):
                    continue
                dead = rec.owner
            if not accept(rec):
                continue
            got = self._write_now(
                partial(self._claim_queued, rec=rec, owner=owner, lease=lease, now=now, dead=dead)
            )
            if got is not None:
                self._lost.pop(got.id, None)  # a lost execution has a successor now
                claimed.append(got)
        return claimed

    def _claim_queued(
        self,
        db: sqlite3.Connection,
        rec: RunRecord,
        owner: str,
        lease: float,
        now: float,
        dead: str | None,
    ) -> RunRecord | None:
        if rec.status == "running" and rec.cancel_requested:
            # Cancelled, and its holder died before it could stop: finish it.
            db.execute(
                "UPDATE runs SET status = 'cancelled', error = ?, owner = NULL, "
                "lease_expires_at = NULL, updated_at = ? WHERE id = ? AND fence = ? "
                "AND status = 'running'",
                (CANCELLED_ERROR, now, rec.id, rec.fence),
            )
            return None
        limits = db.execute(
            "SELECT concurrency, rate, tokens, updated_at FROM queues WHERE name = ?", (rec.queue,)
        ).fetchone()
        if limits is not None and rec.status != "running":
            concurrency, rate, tokens, updated = limits
            if concurrency is not None:
                (busy,) = db.execute(
                    "SELECT count(*) FROM runs WHERE queue = ? AND status = 'running'",
                    (rec.queue,),
                ).fetchone()
                if busy >= concurrency:
                    return None
            if rate is not None and rec.status == "pending":
                tokens = min(max(rate, 1.0), tokens + (now - updated) * rate)
                if tokens < 1:
                    db.execute(
                        "UPDATE queues SET tokens = ?, updated_at = ? WHERE name = ?",
                        (tokens, now, rec.queue),
                    )
                    return None
                db.execute(
                    "UPDATE queues SET tokens = ?, updated_at = ? WHERE name = ?",
                    (tokens - 1, now, rec.queue),
                )
        return self._claim(db, rec.id, owner, lease, now, dead)

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("a queue's concurrency must be at least 1")
        if rate is not None and rate <= 0:
            raise ValueError("a queue's rate must be > 0 runs per second")
        now = time.time()
        self._write_now(
            lambda db: db.execute(
                "INSERT INTO queues (name, concurrency, rate, tokens, updated_at) "
                "VALUES (?,?,?,?,?) ON CONFLICT (name) DO UPDATE SET "
                "concurrency = excluded.concurrency, rate = excluded.rate",
                (name, concurrency, rate, max(rate or 0.0, 1.0), now),
            )
        )

    async def create_runs(self, runs: Sequence[RunRecord]) -> None:
        self._write_now(
            lambda db: db.executemany(
                f"INSERT INTO runs ({RUN_COLUMNS}) VALUES "
                "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING",
                [run_to_row(r) for r in runs],
            )
        )

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        out: list[RunRecord] = []
        ids = list(run_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            out.extend(
                run_from_row(r)
                for r in self._read(
                    f"SELECT {RUN_COLUMNS} FROM runs WHERE id IN ({','.join('?' * len(chunk))})",
                    tuple(chunk),
                )
            )
        return out

    async def wake(self, run_id: str, waiting_for: str) -> None:
        now = time.time()
        self._write_now(
            lambda db: db.execute(
                "UPDATE runs SET status = 'pending', wake_at = NULL, waiting_for = NULL, "
                "updated_at = ? WHERE id = ? AND status = 'suspended' AND waiting_for = ?",
                (now, run_id, waiting_for),
            )
        )

    async def unfinished_children(self, parent_id: str, prefix: str) -> int:
        rows = self._read(
            "SELECT count(*) FROM runs WHERE parent_id = ? AND substr(id, 1, ?) = ? "
            "AND status NOT IN ('succeeded', 'failed', 'cancelled')",
            (parent_id, len(prefix), prefix),
        )
        return int(rows[0][0])

    async def heartbeat(self, owner: str, lease: float, run_ids: Sequence[str]) -> Beat:
        now = time.time()
        ids = list(run_ids)

        def beat(db: sqlite3.Connection) -> Beat:
            found = Beat()
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                db.execute(
                    "UPDATE runs SET lease_expires_at = ? WHERE owner = ? "
                    f"AND status = 'running' AND id IN ({marks})",
                    (now + lease, owner, *chunk),
                )
                held = dict(
                    db.execute(
                        "SELECT id, cancel_requested FROM runs WHERE owner = ? "
                        f"AND status = 'running' AND id IN ({marks})",
                        (owner, *chunk),
                    ).fetchall()
                )
                found.cancel.extend(run_id for run_id, cancel in held.items() if cancel)
                found.lost.extend(run_id for run_id in chunk if run_id not in held)
            return found

        result: Beat = self._write_now(beat)
        for run_id in result.lost:  # not ours to write any more
            self._lost.pop(run_id, None)
        return result

    def _fenced(
        self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...], run_id: str, fence: int
    ) -> int:
        cur = db.execute(sql, params)
        if cur.rowcount == 0:
            row = db.execute("SELECT fence, status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise StoreError(f"run {run_id!r} is not in the store")
            if row[0] != fence:
                raise StaleLeaseError(
                    f"run {run_id!r}: fencing token {fence} is stale (now {row[0]}); "
                    "another worker has taken the run over"
                )
            if row[1] in TERMINAL:
                raise StaleLeaseError(f"run {run_id!r} has already finished ({row[1]})")
        return cur.rowcount

    async def finish_run(
        self, run_id: str, fence: int, status: str, result: str | None, error: str | None
    ) -> None:
        self._refuse_lost(run_id, fence, "ending the execution")
        now = time.time()
        self._write_now(
            lambda db: self._fenced(
                db,
                "UPDATE runs SET status = ?, result = ?, error = ?, owner = NULL, "
                "lease_expires_at = NULL, updated_at = ? WHERE id = ? AND fence = ? "
                "AND status NOT IN ('succeeded', 'failed', 'cancelled')",
                (status, result, error, now, run_id, fence),
                run_id,
                fence,
            )
        )

    async def suspend_run(
        self, run_id: str, fence: int, wake_at: float | None, waiting_for: str | None
    ) -> bool:
        self._refuse_lost(run_id, fence, "suspending the execution")
        now = time.time()

        def park(db: sqlite3.Connection) -> bool:
            ready = (
                waiting_for is not None
                and db.execute(
                    "SELECT 1 FROM signals WHERE run_id = ? AND name = ? AND consumed_by IS NULL "
                    "LIMIT 1",
                    (run_id, waiting_for),
                ).fetchone()
                is not None
            )
            prefix = children_prefix(waiting_for)
            if prefix is not None and not ready:
                # The children may all have finished since the run looked.
                (unfinished,) = db.execute(
                    "SELECT count(*) FROM runs WHERE parent_id = ? AND substr(id, 1, ?) = ? "
                    "AND status NOT IN ('succeeded', 'failed', 'cancelled')",
                    (run_id, len(prefix), prefix),
                ).fetchone()
                ready = unfinished == 0
            status = "pending" if ready else "suspended"
            self._fenced(
                db,
                "UPDATE runs SET status = ?, wake_at = ?, waiting_for = ?, owner = NULL, "
                "lease_expires_at = NULL, updated_at = ? WHERE id = ? AND fence = ? "
                "AND status = 'running'",
                (
                    status,
                    None if ready else wake_at,
                    None if ready else waiting_for,
                    now,
                    run_id,
                    fence,
                ),
                run_id,
                fence,
            )
            return not ready

        parked: bool = self._write_now(park)
        return parked

    async def release(self, run_id: str, fence: int) -> None:
        if self._lost.get(run_id) == fence:
            del self._lost[run_id]  # handed back: the next claim replays it
        now = time.time()
        self._write_now(
            lambda db: db.execute(
                "UPDATE runs SET status = 'pending', owner = NULL, lease_expires_at = NULL, "
                "updated_at = ? WHERE id = ? AND fence = ? AND status = 'running'",
                (now, run_id, fence),
            )
        )

    async def request_cancel(self, run_id: str) -> RunRecord | None:
        now = time.time()
        err = CANCELLED_ERROR
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
                (err, now, run_id, int(abandoned), current.fence if current else -1),
            )
            db.execute(
                "UPDATE runs SET cancel_requested = 1, updated_at = ? "
                "WHERE id = ? AND status = 'running'",
                (now, run_id),
            )

        self._write_now(cancel)
        return await self.get_run(run_id)

    async def next_wake(self) -> float | None:
        rows = self._read(
            "SELECT min(wake_at) FROM runs WHERE status IN ('suspended', 'pending') "
            "AND wake_at IS NOT NULL"
        )
        return rows[0][0] if rows else None

    async def prune(self, older_than: float | None = None, keep: int | None = None) -> int:
        if older_than is None and keep is None:
            raise ValueError("prune needs older_than or keep")

        def delete(db: sqlite3.Connection) -> int:
            # A finished child of an unfinished parent is still needed: the
            # parent reads the child's outcome when it resumes.
            terminal = (
                "status IN ('succeeded', 'failed', 'cancelled') AND NOT EXISTS "
                "(SELECT 1 FROM runs AS parent WHERE parent.id = runs.parent_id "
                "AND parent.status NOT IN ('succeeded', 'failed', 'cancelled'))"
            )
            ids: set[str] = set()
            if older_than is not None:
                ids.update(
                    r[0]
                    for r in db.execute(
                        f"SELECT id FROM runs WHERE {terminal} AND updated_at < ?", (older_than,)
                    )
                )
            if keep is not None:
                ids.update(
                    r[0]
                    for r in db.execute(
                        f"SELECT id FROM runs WHERE {terminal} ORDER BY updated_at DESC "
                        "LIMIT -1 OFFSET ?",
                        (keep,),
                    )
                )
            for table, col in (
                ("steps", "run_id"),
                ("payloads", "run_id"),
                ("signals", "run_id"),
                ("runs", "id"),
            ):
                db.executemany(f"DELETE FROM {table} WHERE {col} = ?", [(i,) for i in ids])
            return len(ids)

        count: int = self._write_now(delete)
        return count

    # -- steps ------------------------------------------------------------------
    async def load_steps(self, run_id: str) -> dict[str, StepRecord]:
        rows = self._read(f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id = ?", (run_id,))
        steps: dict[str, StepRecord] = {}
        spilled = False
        for r in rows:
            steps[r[0]] = StepRecord(*r[:10])
            spilled = spilled or bool(r[10])
        if spilled:
            for key, fld, data in self._read(
                "SELECT key, field, data FROM payloads WHERE run_id = ?", (run_id,)
            ):
                if key in steps:
                    setattr(steps[key], fld, data)
        return steps

    async def record_step(self, run_id: str, fence: int, step: StepRecord) -> StepRecord:
        if self._lost:
            self._refuse_lost(run_id, fence, f"step {step.key}")
        db = self._begin()
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
        except _UNBINDABLE as exc:
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

    def _insert(self, db: sqlite3.Connection, run_id: str, fence: int, step: StepRecord) -> bool:
        """Insert ``step`` (its large values apart) unless ``fence`` no longer
        holds the run or its key has a record; whether it went in."""
        spilled = 0
        values = {"args": step.args, "output": step.output, "error": step.error}
        for fld, bit in SPILL_FIELDS:
            v = values[fld]
            if v is not None and len(v) > SPILL_BYTES:
                spilled |= bit
                values[fld] = None
        cur = db.execute(
            "INSERT INTO steps (run_id, key, name, kind, args_hash, args, output, error, "
            "attempts, started_at, finished_at, spilled) "
            "SELECT ?,?,?,?,?,?,?,?,?,?,?,? WHERE EXISTS "
            "(SELECT 1 FROM runs WHERE id = ? AND fence = ? AND status = 'running') "
            "ON CONFLICT (run_id, key) DO NOTHING",
            (
                run_id,
                step.key,
                step.name,
                step.kind,
                step.args_hash,
                values["args"],
                values["output"],
                values["error"],
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
        if not spilled:
            return True
        for fld, bit in SPILL_FIELDS:
            if spilled & bit:
                db.execute(
                    "INSERT INTO payloads (run_id, key, field, data) VALUES (?,?,?,?)",
                    (run_id, step.key, fld, getattr(step, fld)),
                )
        return True

    def _winner(self, db: sqlite3.Connection, run_id: str, fence: int, key: str) -> StepRecord:
        """The record already kept for ``key``, if ``fence`` still holds the run.

        A stale writer must not learn the new owner's results (it would go on
        executing the run's later steps as if it still held it): it is told
        that it lost the run instead.
        """
        row = db.execute("SELECT fence, status FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None or row[0] != fence or row[1] != "running":
            now = "gone" if row is None else f"fence {row[0]}, {row[1]}"
            raise StaleLeaseError(
                f"run {run_id!r}: step {key} refused, fencing token {fence} is stale (now {now})"
            )
        found = db.execute(
            f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id = ? AND key = ?", (run_id, key)
        ).fetchone()
        if found is None:  # cannot happen: the insert met this very row
            raise StoreError(f"run {run_id!r}: step {key} was neither recorded nor found")
        winner = StepRecord(*found[:10])
        if found[10]:
            for fld, data in db.execute(
                "SELECT field, data FROM payloads WHERE run_id = ? AND key = ?", (run_id, key)
            ):
                setattr(winner, fld, data)
        return winner

    async def _committed(self) -> None:
        """Wait until the batch holding our write is committed (or schedule it)."""
        loop = asyncio.get_running_loop()
        if self.durability == "group":
            if self._flush_handle is None:
                self._flush_handle = loop.call_later(self.group_delay, self._flush_quietly)
            return
        now = time.monotonic()
        if (
            not self._waiting
            and self._flush_handle is None
            and not getattr(loop, "_ready", True)
            and now - self._last_yield < _MAX_INLINE
        ):
            # Nothing else can run before a deferred commit would: no other
            # record could join the batch, so commit now and skip two loop
            # turns. Every few milliseconds we still yield (below), so a long
            # sequential run cannot starve heartbeats or other runs. asyncio
            # offers no public way to ask whether other callbacks are ready,
            # so this reads its private queue; a loop without one (uvloop)
            # takes the default and always defers: correct, only slower.
            self._flush()
            return
        self._last_yield = now
        fut: asyncio.Future[None] = loop.create_future()
        self._waiting.append(fut)
        if self._flush_handle is None:
            self._flush_handle = loop.call_soon(self._flush_quietly)
        await fut

    def _flush_quietly(self) -> None:
        with contextlib.suppress(StoreError):
            self._flush()  # errors reach the waiting steps through their futures

    # -- signals ----------------------------------------------------------------
    async def send_signal(self, run_id: str, name: str, payload: str) -> RunRecord:
        now = time.time()

        def send(db: sqlite3.Connection) -> None:
            row = db.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise RunNotFound(f"no run {run_id!r}")
            if row[0] in TERMINAL:
                raise StoreError(f"run {run_id!r} has finished ({row[0]}); it takes no signals")
            db.execute(
                "INSERT INTO signals (run_id, name, payload, created_at) VALUES (?,?,?,?)",
                (run_id, name, payload, now),
            )
            db.execute(
                "UPDATE runs SET status = 'pending', wake_at = NULL, waiting_for = NULL, "
                "updated_at = ? WHERE id = ? AND status = 'suspended' AND waiting_for = ?",
                (now, run_id, name),
            )

        self._write_now(send)
        rec = await self.get_run(run_id)
        assert rec is not None
        return rec

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        def take(db: sqlite3.Connection) -> str | None:
            row = db.execute(
                "SELECT payload FROM signals WHERE run_id = ? AND consumed_by = ?",
                (run_id, step_key),
            ).fetchone()
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
