"""The PostgreSQL store: any number of worker processes, on any number of machines.

Same semantics as :class:`~stalwart.stores.sqlite.SQLiteStore`, method by
method; what differs is how concurrency is handled:

* **Connections.** A pool (psycopg_pool, ``pool_min``/``pool_max``) serves
  every operation except step records, which go through one dedicated
  connection in autocommit mode. Every connection is in autocommit mode: a
  single statement is one round trip that commits; multi-statement operations
  open an explicit transaction.
* **Group commit.** A step record with nothing in flight is written at once
  by its caller: one ``INSERT ... SELECT ... FROM (VALUES ...)`` statement,
  one round trip, one commit. Records that arrive while a write is in flight
  are written together by the next statement (a writer task drains them;
  large batches travel as one array per column), so a ``gather`` of a
  thousand steps costs a handful of commits, with no timer and no added
  latency. A record the server refuses for good (a NUL in a name) fails
  alone: its batch is written again in halves, so the records of other runs
  beside it still go in. A caller resumes only after the commit holding its
  record (``durability=commit``, the default). With ``durability=group`` the
  step connection runs with ``synchronous_commit=off``: a crash of the
  *server* can lose the last few hundred milliseconds of records, always a
  suffix (the WAL is ordered, S6); a crash of the worker loses nothing it was
  told was recorded. An execution that may have lost records in such a
  crash is stopped before it writes past them (its writes fail with
  :class:`~stalwart.core.errors.StoreUnavailable`), and the run resumes by replay
  from what survived; see ``PostgresStore._write_batch``.
* **Fencing.** A step record checks the run's fence with ``FOR SHARE`` in the
  same statement, so a claim that bumps the fence and a stale write are
  serialized by the row lock: a write either lands before the takeover (and
  the new owner's replay sees it) or is refused. A record the statement
  left out is refused with :class:`~stalwart.core.errors.StaleLeaseError` if its
  fence is stale, even when its key has a record already: a replaced worker
  never gets the new owner's result as its own. Claims are atomic
  conditional ``UPDATE``s; ``claim_due`` picks candidates with ``SELECT ...
  FOR UPDATE SKIP LOCKED``, so two workers never receive the same run and
  never wait for each other.
* **Leases** are measured on the server's clock (``clock_timestamp()``), so
  clock skew between worker machines cannot make a lease look expired early.
  Timer wake times are recorded by the runtime on the worker's clock, as on
  SQLite.
* **Retries.** Transient failures (connection lost, server restarting or
  out of connections, serialization failures, deadlocks, lock or statement
  timeouts, no pooled connection in time) are retried with bounded
  exponential backoff for up to ``retry_for`` seconds, then reported as
  :class:`~stalwart.core.errors.StoreUnavailable` naming the server. Errors the
  server would give again (a value too large for an index, bad data, a
  broken constraint) are raised at once as a plain
  :class:`~stalwart.core.errors.StoreError`, never retried (S14). Every
  operation is safe to repeat: step records are idempotent by key (a retry
  whose first attempt did commit finds its own record and returns it),
  signals carry a client-made id, and a run left held by this owner by a
  claim whose reply was lost is claimed again (as on SQLite, a run held by
  its own owner but not live there counts as abandoned).
* **Waking** is by polling, as on SQLite: the runner asks ``claim_due`` and
  ``next_wake`` every ``poll_interval`` (and at once after its own signals);
  each ask is a few indexed queries, whatever the number of waiting runs.
* **Schema** lives in its own PostgreSQL schema (``schema=stalwart`` by
  default), created and migrated on open under an advisory lock, so workers
  starting together do not race.

URL: ``postgresql://user:pass@host:5432/db?schema=stalwart&pool_min=1&pool_max=10``;
the options below are ours and removed before the URL reaches libpq; any other
query parameter (``sslmode``, ``connect_timeout``, ...) is passed through.

=================  ==========  ==============================================
option             default     meaning
=================  ==========  ==============================================
``schema``         stalwart    PostgreSQL schema holding the tables
``pool_min``       1           connections kept open in the pool
``pool_max``       10          most connections in the pool (plus one for steps)
``pool_timeout``   10          seconds to wait for a pooled connection
``retry_for``      15          seconds a failing operation is retried
``durability``     commit      ``commit`` or ``group`` (see above)
=================  ==========  ==============================================
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from ..core.errors import RunNotFound, StaleLeaseError, StoreError, StoreUnavailable
from ..core.ledger import TERMINAL, RunRecord, StepRecord
from .base import (
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

__all__ = ["PostgresStore"]

T = TypeVar("T")
Conn = psycopg.AsyncConnection[TupleRow]

SCHEMA_VERSION = 2

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE {s}.runs (
            id TEXT PRIMARY KEY,
            policy TEXT NOT NULL,
            inputs TEXT NOT NULL,
            status TEXT NOT NULL,
            result TEXT,
            error TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            code_version TEXT NOT NULL DEFAULT '',
            wake_at DOUBLE PRECISION,
            waiting_for TEXT,
            owner TEXT,
            lease_expires_at DOUBLE PRECISION,
            fence BIGINT NOT NULL DEFAULT 0,
            cancel_requested BOOLEAN NOT NULL DEFAULT false,
            queue TEXT NOT NULL DEFAULT 'default',
            priority INTEGER NOT NULL DEFAULT 0,
            parent_id TEXT
        ) WITH (fillfactor = 80)""",
        # claim_due's candidate lists (pending, woken, running) each have one.
        "CREATE INDEX runs_pending ON {s}.runs (priority DESC, created_at) "
        "WHERE status = 'pending'",
        "CREATE INDEX runs_wake ON {s}.runs (wake_at) "
        "WHERE status IN ('suspended', 'pending') AND wake_at IS NOT NULL",
        "CREATE INDEX runs_running ON {s}.runs (owner) WHERE status = 'running'",
        # list_runs, prune
        "CREATE INDEX runs_by_status ON {s}.runs (status, created_at)",
        "CREATE INDEX runs_created ON {s}.runs (created_at)",
        "CREATE INDEX runs_children ON {s}.runs (parent_id) WHERE parent_id IS NOT NULL",
        """CREATE TABLE {s}.queues (
            name TEXT PRIMARY KEY,
            concurrency INTEGER,
            rate DOUBLE PRECISION,
            tokens DOUBLE PRECISION NOT NULL DEFAULT 0,
            refilled_at DOUBLE PRECISION NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE {s}.steps (
            run_id TEXT NOT NULL,
            key TEXT NOT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            args_hash TEXT NOT NULL,
            args TEXT,
            output TEXT,
            error TEXT,
            attempts INTEGER NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            finished_at DOUBLE PRECISION NOT NULL,
            spilled SMALLINT NOT NULL DEFAULT 0,
            PRIMARY KEY (run_id, key)
        )""",
        """CREATE TABLE {s}.payloads (
            run_id TEXT NOT NULL,
            key TEXT NOT NULL,
            field TEXT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, key, field)
        )""",
        """CREATE TABLE {s}.signals (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            uid TEXT NOT NULL UNIQUE,
            run_id TEXT NOT NULL,
            name TEXT NOT NULL,
            payload TEXT NOT NULL,
            consumed_by TEXT,
            created_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX signals_unread ON {s}.signals (run_id, name, id) WHERE consumed_by IS NULL",
        "CREATE INDEX signals_by_run ON {s}.signals (run_id, consumed_by)",
    ),
    # Which life of the server this is (see PostgresStore._write_batch): an
    # unlogged table is emptied by crash recovery and by a failover, and
    # kept by a clean restart, so its one row changes exactly when
    # asynchronously committed records may have been lost.
    2: (
        """CREATE UNLOGGED TABLE {s}.incarnation (
            one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
            token TEXT NOT NULL
        )""",
    ),
}

_STEP_COLUMNS = (
    "key, name, args_hash, args, output, error, attempts, started_at, finished_at, kind, spilled"
)
# The server's clock, in seconds since the epoch, for leases.
_NOW = "extract(epoch FROM clock_timestamp())::float8"
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

# Failures worth another attempt, by SQLSTATE: the connection broke (08),
# the server is short of connections, memory or disk (53), lost a race
# and rolled back (40001 serialization, 40P01 deadlock, 40003 outcome
# unknown), timed out on a lock or a statement (55P03, 57014), or is
# shutting down or starting (57P01-57P03). Anything else the server reports
# (a value too large for an index, bad data, a constraint) fails the same
# way next time, so it is raised at once.
_TRANSIENT_CLASSES = frozenset({"08", "53"})
_TRANSIENT_STATES = frozenset(
    {"40001", "40P01", "40003", "55P03", "57014", "57P01", "57P02", "57P03"}
)


def _transient(exc: psycopg.Error) -> bool:
    """Whether the same operation may succeed if tried again later."""
    state = exc.sqlstate
    if state is None:
        # Raised by the client, not the server: a lost or refused connection
        # or no pooled connection in time (PoolTimeout) is transient; a value
        # libpq cannot send (a NUL in a string) is not.
        return isinstance(exc, psycopg.OperationalError)
    return state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES


_OPTIONS = ("schema", "pool_min", "pool_max", "pool_timeout", "retry_for", "durability")
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _step(r: Sequence[Any]) -> StepRecord:
    return StepRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])


@dataclass(slots=True)
class _Limit:
    """What a limited queue may still start in one claim."""

    left: float  # runs it may start (concurrency minus running)
    rate: float | None
    tokens: float  # starts of pending runs the rate allows now


@dataclass(slots=True, eq=False)
class _Pending:
    """A step record waiting for the step writer."""

    run_id: str
    fence: int
    step: StepRecord
    args: str | None
    output: str | None
    error: str | None
    spilled: int
    future: asyncio.Future[StepRecord] = field(repr=False)
    rounds: int = 0  # batches it went out in without a verdict


class PostgresStore(Store):
    """A Store in a PostgreSQL database. Build from a URL with :meth:`from_url`."""

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "stalwart",
        pool_min: int = 1,
        pool_max: int = 10,
        pool_timeout: float = 10.0,
        retry_for: float = 15.0,
        durability: str = "commit",
        url: str | None = None,
    ) -> None:
        if not _SCHEMA_NAME.match(schema):
            raise StoreError(
                f"schema must be a plain identifier (letters, digits, _), not {schema!r}"
            )
        if durability not in ("commit", "group"):
            raise StoreError(f"durability must be 'commit' or 'group', not {durability!r}")
        if pool_min < 0 or pool_max < 1 or pool_max < pool_min:
            raise StoreError(
                f"need 0 <= pool_min <= pool_max and pool_max >= 1 "
                f"(got pool_min={pool_min}, pool_max={pool_max})"
            )
        self.conninfo = conninfo
        self.url = url or conninfo
        self.schema = schema
        self.pool_min = pool_min
        self.pool_max = pool_max
        self.pool_timeout = pool_timeout
        self.retry_for = retry_for
        self.durability = durability
        try:
            params = conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as exc:
            raise StoreError(f"bad PostgreSQL URL: {exc}") from None
        self.where = _where(params)
        self._connect_kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._connect_kwargs["connect_timeout"] = 5
        if "application_name" not in params:
            self._connect_kwargs["application_name"] = "stalwart"
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._step_conn: Conn | None = None
        self._closing = False
        self._pending: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None
        self._leading = False  # a caller is writing its own record right now
        # durability=group bookkeeping (see _write_batch): the server life
        # the step connection belongs to; per run, the fence and server life
        # of records acknowledged but maybe not yet flushed; and the
        # executions (run, fence) whose acknowledged records may be lost.
        self._token: str | None = None
        self._unsynced: dict[str, tuple[int, str]] = {}
        self._lost: dict[str, int] = {}
        # Transient failures retried so far: an outage shows here first.
        self.retries = 0
        self._dead_owners: set[str] = set()
        # Claims of one store run one at a time: a runner's recovery and its
        # background loop may both claim, and a claim must reach the runner
        # (which marks the run live) before the next one can judge "ours but
        # not live".
        self._claiming = asyncio.Lock()
        self._checking: asyncio.Task[None] | None = None
        self._sql = _Sql(f'"{schema}"')

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        """``postgresql://user@host:port/db?schema=...&pool_max=...``; see the module doc."""
        parts = urlsplit(url)
        ours: dict[str, str] = {}
        theirs: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in _OPTIONS:
                ours[key] = value
            else:
                theirs.append((key, value))
        conninfo = urlunsplit(parts._replace(query=urlencode(theirs)))
        kwargs: dict[str, Any] = {}
        for key, value in ours.items():
            if key in ("schema", "durability"):
                kwargs[key] = value
            elif key in ("pool_min", "pool_max"):
                try:
                    kwargs[key] = int(value)
                except ValueError:
                    raise StoreError(f"{key} must be a whole number, not {value!r}") from None
            else:
                try:
                    kwargs[key] = float(value)
                except ValueError:
                    raise StoreError(f"{key} must be a number of seconds, not {value!r}") from None
        return cls(conninfo, url=url, **kwargs)

    # -- connections ------------------------------------------------------------
    async def open(self) -> None:
        if self._pool is not None:
            return
        self._closing = False
        # One direct connection first: it reports an unreachable server with
        # libpq's own words, then migrates, then serves the step records.
        conn = await self._connect()
        try:
            await self._migrate(conn)
            self._step_conn = await self._for_steps(conn)
        except psycopg.Error as exc:
            await conn.close()
            raise _classified(exc, f"PostgreSQL at {self.where}: cannot set up the schema") from exc
        except BaseException:
            await conn.close()
            raise
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self.conninfo,
            min_size=self.pool_min,
            max_size=self.pool_max,
            kwargs=self._connect_kwargs,
            timeout=self.pool_timeout,
            name=f"stalwart:{self.schema}",
            open=False,
        )
        try:
            await pool.open(wait=self.pool_min > 0, timeout=self.pool_timeout)
        except psycopg.Error as exc:
            await pool.close()
            await self._step_conn.close()
            self._step_conn = None
            raise StoreUnavailable(f"cannot reach PostgreSQL at {self.where}: {exc}") from exc
        self._pool = pool

    async def _connect(self) -> Conn:
        try:
            conn = await psycopg.AsyncConnection.connect(self.conninfo, **self._connect_kwargs)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot reach PostgreSQL at {self.where}: {exc}") from exc
        return conn

    async def _for_steps(self, conn: Conn) -> Conn:
        """``conn``, set up for step records: in group mode it commits
        asynchronously and learns which life of the server it talks to."""
        try:
            if self.durability == "group":
                await conn.execute("SET synchronous_commit = off")
                self._token = await self._incarnation(conn)
        except BaseException:  # cancelled or failed half-way: never leak the socket
            await conn.close()
            raise
        return conn

    async def _incarnation(self, conn: Conn) -> str:
        """The token naming this life of the server, made by the first
        connection after a crash; every connection until the next crash reads
        the same one."""
        s = self._sql.s
        mine = uuid.uuid4().hex
        for _ in range(5):
            # A racing store's token, committed after this statement's
            # snapshot, is invisible to it: the next pass reads it.
            cur = await conn.execute(
                f"WITH made AS (INSERT INTO {s}.incarnation (token) VALUES (%s) "
                "ON CONFLICT DO NOTHING RETURNING token) "
                f"SELECT token FROM made UNION ALL SELECT token FROM {s}.incarnation",
                (mine,),
            )
            row = await cur.fetchone()
            if row is not None:
                return str(row[0])
        # Emptied under us again and again: a transient oddity, retried later.
        raise pg_errors.SerializationFailure("the incarnation token keeps changing")

    async def _migrate(self, conn: Conn) -> None:
        s = self._sql.s
        if await self._schema_version(conn) == SCHEMA_VERSION:
            return  # the usual case: no DDL, no lock, no privileges needed
        lock = int.from_bytes(
            hashlib.blake2b(f"stalwart:{self.schema}".encode(), digest_size=8).digest(),
            "big",
            signed=True,
        )
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {s}.stalwart_schema ("
                "version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            current = await self._schema_version(conn) or 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"schema {self.schema!r} at {self.where} has version {current}, newer than "
                    f"this Stalwart ({SCHEMA_VERSION}); upgrade stalwart"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version]:
                    await conn.execute(statement.format(s=s))
                await conn.execute(
                    f"INSERT INTO {s}.stalwart_schema (version, applied_at) VALUES (%s, %s)",
                    (version, time.time()),
                )

    async def _schema_version(self, conn: Conn) -> int | None:
        cur = await conn.execute("SELECT to_regclass(%s)", (f"{self._sql.s}.stalwart_schema",))
        row = await cur.fetchone()
        if row is None or row[0] is None:
            return None
        cur = await conn.execute(f"SELECT max(version) FROM {self._sql.s}.stalwart_schema")
        row = await cur.fetchone()
        return None if row is None or row[0] is None else int(row[0])

    async def close(self) -> None:
        self._closing = True  # a connection still being made is closed, not kept
        if self._writer is not None:
            await asyncio.wait([self._writer])  # pending step records are written first
        if self._checking is not None:
            self._checking.cancel()
            await asyncio.wait([self._checking])
            self._checking = None
        if self._step_conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._step_conn.close()
            self._step_conn = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            with contextlib.suppress(psycopg.Error):
                await pool.close()

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "url": _mask(self.url),
            "server": self.where,
            "schema": self.schema,
            "durability": self.durability,
            "pool_min": self.pool_min,
            "pool_max": self.pool_max,
            "retries": self.retries,
        }
        if self._pool is not None:
            info["pool"] = self._pool.get_stats()
        return info

    # -- retries ------------------------------------------------------------------
    async def _retrying(self, what: str, attempt: Callable[[int, float], Awaitable[T]]) -> T:
        """Run ``attempt(n, deadline)`` until it succeeds, fails for good, or
        ``retry_for`` seconds of transient failures have passed.

        Only a transient failure is tried again (S14): an error the server
        will give again (a run id too long for its index) is raised at once
        as a plain :class:`StoreError`, so a runner fails the run instead of
        retrying it; a store still down at the deadline raises
        :class:`StoreUnavailable`, so a runner keeps the run for later.
        """
        deadline = time.monotonic() + self.retry_for
        n = 0
        delay = 0.02
        while True:
            n += 1
            try:
                return await attempt(n, deadline)
            except psycopg.Error as exc:
                if not _transient(exc):
                    raise _classified(exc, f"PostgreSQL at {self.where}: {what}") from exc
                pause = delay * (0.5 + random.random())
                if time.monotonic() + pause > deadline:
                    raise StoreUnavailable(
                        f"PostgreSQL at {self.where}: {what} failed after {n} attempt"
                        f"{'s' if n > 1 else ''} over {self.retry_for:g} s: "
                        f"{type(exc).__name__}: {_short(exc)}"
                    ) from exc
                self.retries += 1
                self._check_pool()
                await asyncio.sleep(pause)
                delay = min(delay * 2, 1.0)

    def _check_pool(self) -> None:
        """After a failure, have the pool drop its broken connections (once at a time)."""
        pool = self._pool
        if pool is None or (self._checking is not None and not self._checking.done()):
            return

        async def check() -> None:
            with contextlib.suppress(Exception):
                await pool.check()

        self._checking = asyncio.get_running_loop().create_task(check())

    async def _with_conn(self, what: str, fn: Callable[[Conn, int], Awaitable[T]]) -> T:
        """Run ``fn(conn, attempt)`` on a pooled connection, retrying transient failures."""
        pool = self._pool
        if pool is None:
            raise StoreError("the PostgreSQL store is not open")

        async def attempt(n: int, deadline: float) -> T:
            wait = max(0.05, min(self.pool_timeout, deadline - time.monotonic()))
            task = asyncio.current_task()
            cancelling = task.cancelling() if task is not None else 0
            async with pool.connection(timeout=wait) as conn:
                if task is not None and task.cancelling() > cancelling:
                    # Python 3.11's wait_for (inside the pool) can swallow a
                    # cancellation that lands as a connection is handed over:
                    # deliver it, or the caller would never stop.
                    raise asyncio.CancelledError
                return await fn(conn, n)

        return await self._retrying(what, attempt)

    async def _fetchone(self, what: str, sql: str, params: Any = None) -> tuple[Any, ...] | None:
        async def fn(conn: Conn, n: int) -> tuple[Any, ...] | None:
            cur = await conn.execute(sql, params)
            return await cur.fetchone()

        return await self._with_conn(what, fn)

    async def _fetchall(self, what: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        async def fn(conn: Conn, n: int) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql, params)
            return await cur.fetchall()

        return await self._with_conn(what, fn)

    # -- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        params = run_to_row(run)

        async def fn(conn: Conn, n: int) -> tuple[RunRecord, bool]:
            cur = await conn.execute(self._sql.create_run, params)
            row = await cur.fetchone()
            if row is not None:
                return run_from_row(row), True
            cur = await conn.execute(self._sql.get_run, (run.id,))
            row = await cur.fetchone()
            if row is None:  # deleted between the two statements: try again
                raise pg_errors.SerializationFailure(f"run {_q(run.id)} vanished while created")
            return run_from_row(row), False

        return await self._with_conn(f"creating run {_q(run.id)}", fn)

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._fetchone(f"reading run {_q(run_id)}", self._sql.get_run, (run_id,))
        return run_from_row(row) if row else None

    async def create_runs(self, runs: Sequence[RunRecord]) -> None:
        rows = [run_to_row(r) for r in runs]

        async def fn(conn: Conn, n: int) -> None:
            # One statement per thousand runs, all in one transaction.
            async with conn.transaction():
                for i in range(0, len(rows), 1000):
                    chunk = rows[i : i + 1000]
                    cols = [list(c) for c in zip(*chunk, strict=True)]
                    await conn.execute(self._sql.create_runs, cols)

        if rows:
            await self._with_conn(f"creating {len(rows)} runs", fn)

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        rows = await self._fetchall(
            "reading runs",
            f"SELECT {RUN_COLUMNS} FROM {self._sql.s}.runs WHERE id = ANY(%s)",
            (list(run_ids),),
        )
        return [run_from_row(r) for r in rows]

    async def wake(self, run_id: str, waiting_for: str) -> None:
        now = time.time()

        async def fn(conn: Conn, n: int) -> None:
            await conn.execute(
                f"UPDATE {self._sql.s}.runs SET status = 'pending', wake_at = NULL, "
                "waiting_for = NULL, updated_at = %s WHERE id = %s AND status = 'suspended' "
                "AND waiting_for = %s",
                (now, run_id, waiting_for),
            )

        await self._with_conn(f"waking run {_q(run_id)}", fn)

    async def unfinished_children(self, parent_id: str, prefix: str) -> int:
        row = await self._fetchone(
            f"counting the children of run {_q(parent_id)}",
            f"SELECT count(*) FROM {self._sql.s}.runs WHERE parent_id = %s "
            "AND starts_with(id, %s) AND status NOT IN ('succeeded', 'failed', 'cancelled')",
            (parent_id, prefix),
        )
        return int(row[0]) if row else 0

    async def list_runs(
        self, status: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[RunRecord]:
        s = self._sql.s
        if status is None:
            rows = await self._fetchall(
                "listing runs",
                f"SELECT {RUN_COLUMNS} FROM {s}.runs ORDER BY created_at DESC LIMIT %s OFFSET %s",
                (limit, offset),
            )
        else:
            rows = await self._fetchall(
                "listing runs",
                f"SELECT {RUN_COLUMNS} FROM {s}.runs WHERE status = %s "
                "ORDER BY created_at DESC LIMIT %s OFFSET %s",
                (status, limit, offset),
            )
        return [run_from_row(r) for r in rows]

    async def claim(self, run_id: str, owner: str, lease: float) -> RunRecord | None:
        now = time.time()

        async def fn(conn: Conn, n: int) -> RunRecord | None:
            # A run held by us but not live here (a claim whose reply was lost,
            # a store outage) is ours to take again, as on SQLite.
            args = {"id": run_id, "owner": owner, "lease": lease, "now": now, "owners": [owner]}
            cur = await conn.execute(self._sql.claim, args)
            row = await cur.fetchone()
            if row is not None:
                return run_from_row(row)
            cur = await conn.execute(
                f"SELECT status, owner FROM {self._sql.s}.runs WHERE id = %s", (run_id,)
            )
            held = await cur.fetchone()
            if held is None or held[0] != "running" or not owner_is_dead(held[1]):
                return None
            cur = await conn.execute(self._sql.claim, {**args, "owners": [owner, held[1]]})
            row = await cur.fetchone()
            return run_from_row(row) if row else None

        async with self._claiming:
            return await self._with_conn(f"claiming run {_q(run_id)}", fn)

    async def claim_due(
        self,
        owner: str,
        lease: float,
        limit: int,
        accept: Callable[[RunRecord], bool],
        queues: Sequence[str] | None = None,
    ) -> list[RunRecord]:
        s = self._sql.s
        wanted = None if queues is None else list(queues)
        sql = self._sql

        async def fn(conn: Conn, n: int) -> list[RunRecord]:
            now = time.time()
            async with conn.transaction():
                limits = await self._queue_limits(conn, wanted, now)
                # Abandoned runs first: lease expired, ours but not live (a
                # lost reply, a store outage), or held by a dead process here.
                dead = [owner, *await self._dead_on_this_host(conn, owner)]
                args: dict[str, Any] = {
                    "now": now,
                    "owner": owner,
                    "dead": dead,
                    "all": wanted is None,
                    "queues": wanted or [],
                    "n": max(limit, 1) * 2,
                    "busy": [q for q, lim in limits.items() if lim.left <= 0],
                    "dry": [q for q, lim in limits.items() if lim.left <= 0 or lim.tokens < 1],
                }
                # Read them without locking (our own live runs are among them
                # and must not be locked against their own step records), then
                # lock the ones we want, checking again that they are abandoned.
                rows = await (await conn.execute(sql.abandoned, args)).fetchall()
                wanted_ids = [
                    r[0] for r in rows if (r[14] and r[11] != owner) or accept(run_from_row(r))
                ][: max(limit, 1) * 2]
                rows = []
                if wanted_ids:
                    args["ids"] = wanted_ids
                    rows = await (await conn.execute(sql.abandoned_lock, args)).fetchall()
                # Then ready runs, best first: pending ones (past any delayed
                # start) and suspended ones whose timer is due.
                ready = await (await conn.execute(sql.pending, args)).fetchall()
                ready += await (await conn.execute(sql.woken, args)).fetchall()
                ready.sort(key=lambda r: (-r[16], r[6]))
                take: list[str] = []
                cancel: list[str] = []
                for row in rows:
                    if row[14]:
                        cancel.append(row[0])  # abandoned while asked to stop
                    elif len(take) < limit:
                        take.append(row[0])  # accepted above
                for row in ready:
                    rec = run_from_row(row)
                    if len(take) >= limit:
                        break
                    lim = limits.get(rec.queue)
                    if lim is not None and (
                        lim.left <= 0 or (rec.status == "pending" and lim.tokens < 1)
                    ):
                        continue
                    if not accept(rec):
                        continue
                    take.append(rec.id)
                    if lim is not None:
                        lim.left -= 1
                        if rec.status == "pending" and lim.rate is not None:
                            lim.tokens -= 1
                if cancel:
                    await conn.execute(
                        f"UPDATE {s}.runs SET status = 'cancelled', error = %s, owner = NULL, "
                        "lease_expires_at = NULL, wake_at = NULL, waiting_for = NULL, "
                        "updated_at = %s WHERE id = ANY(%s)",
                        (CANCELLED_ERROR, now, cancel),
                    )
                rated = [(q, lim.tokens) for q, lim in limits.items() if lim.rate is not None]
                if rated:
                    await conn.execute(
                        f"UPDATE {s}.queues q SET tokens = t.tokens, refilled_at = %s "
                        "FROM unnest(%s::text[], %s::float8[]) AS t(name, tokens) "
                        "WHERE q.name = t.name",
                        (now, [q for q, _ in rated], [tk for _, tk in rated]),
                    )
                if not take:
                    return []
                cur = await conn.execute(
                    f"UPDATE {s}.runs SET owner = %s, lease_expires_at = {_NOW} + %s, "
                    "fence = fence + 1, status = 'running', wake_at = NULL, waiting_for = NULL, "
                    f"updated_at = %s WHERE id = ANY(%s) RETURNING {RUN_COLUMNS}",
                    (owner, lease, now, take),
                )
                got = {r[0]: run_from_row(r) for r in await cur.fetchall()}
            return [got[i] for i in take if i in got]

        async with self._claiming:
            return await self._with_conn("claiming ready runs", fn)

    async def _queue_limits(
        self, conn: Conn, queues: list[str] | None, now: float
    ) -> dict[str, _Limit]:
        """The limited queues among ``queues``, with what each may start now.

        Their rows stay locked until the claim commits, so workers claiming
        from one limited queue take turns and no limit is overshot; queues
        without limits cost one cheap read.
        """
        s = self._sql.s
        cur = await conn.execute(
            f"SELECT name, concurrency, rate, tokens, refilled_at FROM {s}.queues "
            "WHERE (%s OR name = ANY(%s)) ORDER BY name FOR UPDATE",
            (queues is None, queues or []),
        )
        rows = await cur.fetchall()
        if not rows:
            return {}
        running: dict[str, int] = {}
        if any(row[1] is not None for row in rows):
            cur = await conn.execute(
                f"SELECT queue, count(*) FROM {s}.runs WHERE status = 'running' "
                "AND queue = ANY(%s) GROUP BY queue",
                ([row[0] for row in rows if row[1] is not None],),
            )
            running = {q: int(c) for q, c in await cur.fetchall()}
        limits: dict[str, _Limit] = {}
        for name, concurrency, rate, tokens, refilled_at in rows:
            left = float("inf") if concurrency is None else concurrency - running.get(name, 0)
            if rate is not None:
                # A token bucket holding up to one second of starts (at least one).
                tokens = min(max(rate, 1.0), tokens + max(0.0, now - refilled_at) * rate)
            else:
                tokens = float("inf")
            limits[name] = _Limit(left, rate, tokens)
        return limits

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("a queue's concurrency must be at least 1")
        if rate is not None and rate <= 0:
            raise ValueError("a queue's rate must be > 0 runs per second")
        s = self._sql.s
        now = time.time()

        async def fn(conn: Conn, n: int) -> None:
            if concurrency is None and rate is None:
                await conn.execute(f"DELETE FROM {s}.queues WHERE name = %s", (name,))
                return
            await conn.execute(
                f"INSERT INTO {s}.queues (name, concurrency, rate, tokens, refilled_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET "
                "concurrency = excluded.concurrency, rate = excluded.rate",
                (name, concurrency, rate, max(rate or 0.0, 1.0), now),
            )

        await self._with_conn(f"limiting queue {_q(name)}", fn)

    async def _dead_on_this_host(self, conn: Conn, me: str) -> list[str]:
        """Holders of running runs that are processes of this host known to have exited."""
        host = me.partition(":")[0]
        cur = await conn.execute(
            f"SELECT DISTINCT owner FROM {self._sql.s}.runs WHERE status = 'running' "
            "AND starts_with(owner, %s) AND owner <> %s",
            (f"{host}:", me),
        )
        dead: list[str] = []
        for (holder,) in await cur.fetchall():
            if holder in self._dead_owners or owner_is_dead(holder):
                self._dead_owners.add(holder)  # a process that exited stays dead
                dead.append(holder)
        return dead

    async def heartbeat(self, owner: str, lease: float, run_ids: Sequence[str]) -> Beat:
        if not run_ids:
            return Beat()
        rows = await self._fetchall(
            "extending leases", self._sql.heartbeat, (lease, owner, list(run_ids), owner)
        )
        held = {r[0] for r in rows}
        lost = [run_id for run_id in run_ids if run_id not in held]
        for run_id in lost:  # not ours to write any more: forget what we tracked
            self._unsynced.pop(run_id, None)
            self._lost.pop(run_id, None)
        return Beat(cancel=[r[0] for r in rows if r[1]], lost=lost)

    async def _fenced(
        self,
        conn: Conn,
        sql: str,
        params: Sequence[Any],
        run_id: str,
        fence: int,
        token: str | None = None,
    ) -> int:
        """Run a fenced update; on no row, raise why (a stale fence, a
        finished run, or, given the server life ``token`` of the run's
        unflushed records, a server crash that may have lost them)."""
        cur = await conn.execute(sql, (*params, token) if token is not None else params)
        if cur.rowcount == 0:
            await self._check_fence(conn, run_id, fence)
            if token is not None and not await self._alive(conn, token):
                self._unsynced.pop(run_id, None)
                self._lost[run_id] = fence
                raise self._lost_error(run_id, "ending the execution")
        return cur.rowcount

    def _guard(self, run_id: str, fence: int) -> tuple[str, str | None]:
        """The condition (and its token) that keeps this execution from
        ending in another server life than the one that acknowledged its
        unflushed records (durability=group; see _write_batch)."""
        if self._lost.get(run_id) == fence:
            raise self._lost_error(run_id, "ending the execution")
        noted = self._unsynced.get(run_id)
        if noted is None or noted[0] != fence:
            return "", None
        return f" AND EXISTS (SELECT 1 FROM {self._sql.s}.incarnation WHERE token = %s)", noted[1]

    async def _alive(self, conn: Conn, token: str) -> bool:
        cur = await conn.execute(
            f"SELECT 1 FROM {self._sql.s}.incarnation WHERE token = %s", (token,)
        )
        return await cur.fetchone() is not None

    def _flushed(self, run_id: str, fence: int) -> None:
        """A synchronous commit ended this execution of the run and flushed
        its records: nothing about it (or an earlier one) is at risk now."""
        noted = self._unsynced.get(run_id)
        if noted is not None and noted[0] <= fence:
            del self._unsynced[run_id]
        if self._lost.get(run_id, fence + 1) <= fence:
            del self._lost[run_id]

    async def _check_fence(self, conn: Conn, run_id: str, fence: int, what: str = "") -> None:
        cur = await conn.execute(
            f"SELECT fence, status FROM {self._sql.s}.runs WHERE id = %s", (run_id,)
        )
        row = await cur.fetchone()
        if row is None:
            raise StoreError(f"run {_q(run_id)} is not in the store")
        if row[0] != fence:
            raise StaleLeaseError(
                f"run {_q(run_id)}: {what}fencing token {fence} is stale (now {row[0]}); "
                "another worker has taken the run over"
            )
        if row[1] in TERMINAL:
            raise StaleLeaseError(f"run {_q(run_id)}: {what}it has already finished ({row[1]})")

    async def finish_run(
        self, run_id: str, fence: int, status: str, result: str | None, error: str | None
    ) -> None:
        now = time.time()
        guard, token = self._guard(run_id, fence)

        async def fn(conn: Conn, n: int) -> None:
            await self._fenced(
                conn,
                f"UPDATE {self._sql.s}.runs SET status = %s, result = %s, error = %s, "
                "owner = NULL, lease_expires_at = NULL, updated_at = %s WHERE id = %s "
                f"AND fence = %s AND status NOT IN ('succeeded', 'failed', 'cancelled'){guard}",
                (status, result, error, now, run_id, fence),
                run_id,
                fence,
                token,
            )

        await self._with_conn(f"finishing run {_q(run_id)}", fn)
        self._flushed(run_id, fence)

    async def suspend_run(
        self, run_id: str, fence: int, wake_at: float | None, waiting_for: str | None
    ) -> bool:
        now = time.time()
        s = self._sql.s
        guard, token = self._guard(run_id, fence)

        async def fn(conn: Conn, n: int) -> bool:
            async with conn.transaction():
                # Lock the run first: send_signal does too, so a signal either
                # arrives before this check or finds the run suspended and wakes it.
                await conn.execute(f"SELECT 1 FROM {s}.runs WHERE id = %s FOR UPDATE", (run_id,))
                ready = False
                if waiting_for is not None:
                    cur = await conn.execute(
                        f"SELECT 1 FROM {s}.signals WHERE run_id = %s AND name = %s "
                        "AND consumed_by IS NULL LIMIT 1",
                        (run_id, waiting_for),
                    )
                    ready = await cur.fetchone() is not None
                prefix = children_prefix(waiting_for)
                if prefix is not None and not ready:
                    # The children may all have finished since the run looked;
                    # the row lock above orders this against their wake().
                    cur = await conn.execute(
                        f"SELECT count(*) FROM {s}.runs WHERE parent_id = %s "
                        "AND starts_with(id, %s) "
                        "AND status NOT IN ('succeeded', 'failed', 'cancelled')",
                        (run_id, prefix),
                    )
                    row = await cur.fetchone()
                    ready = row is not None and row[0] == 0
                await self._fenced(
                    conn,
                    f"UPDATE {s}.runs SET status = %s, wake_at = %s, waiting_for = %s, "
                    "owner = NULL, lease_expires_at = NULL, updated_at = %s WHERE id = %s "
                    f"AND fence = %s AND status = 'running'{guard}",
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

        parked = await self._with_conn(f"suspending run {_q(run_id)}", fn)
        self._flushed(run_id, fence)
        return parked

    async def release(self, run_id: str, fence: int) -> None:
        now = time.time()

        async def fn(conn: Conn, n: int) -> None:
            await conn.execute(
                f"UPDATE {self._sql.s}.runs SET status = 'pending', owner = NULL, "
                "lease_expires_at = NULL, updated_at = %s WHERE id = %s AND fence = %s "
                "AND status = 'running'",
                (now, run_id, fence),
            )

        await self._with_conn(f"releasing run {_q(run_id)}", fn)
        # What a crash lost before this commit, the next execution's replay redoes.
        self._flushed(run_id, fence)

    async def request_cancel(self, run_id: str) -> RunRecord | None:
        now = time.time()

        async def fn(conn: Conn, n: int) -> RunRecord | None:
            cur = await conn.execute(
                f"SELECT status, owner, fence, lease_expires_at < {_NOW} "
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

        return await self._with_conn(f"cancelling run {_q(run_id)}", fn)

    async def next_wake(self) -> float | None:
        row = await self._fetchone(
            "reading the next wake time",
            f"SELECT min(wake_at) FROM {self._sql.s}.runs "
            "WHERE status IN ('suspended', 'pending') AND wake_at IS NOT NULL",
        )
        return None if row is None or row[0] is None else float(row[0])

    async def prune(self, older_than: float | None = None, keep: int | None = None) -> int:
        if older_than is None and keep is None:
            raise ValueError("prune needs older_than or keep")
        s = self._sql.s
        # A finished child of an unfinished parent is still needed: the
        # parent reads the child's outcome when it resumes (S12).
        terminal = (
            "status IN ('succeeded', 'failed', 'cancelled') AND NOT EXISTS "
            f"(SELECT 1 FROM {s}.runs AS parent WHERE parent.id = runs.parent_id "
            "AND parent.status NOT IN ('succeeded', 'failed', 'cancelled'))"
        )
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
            params.append(keep)
        sql = f"""WITH doomed AS (
                SELECT id FROM {s}.runs WHERE {terminal} AND ({" OR ".join(arms)}) FOR UPDATE
            ), d_steps AS (
                DELETE FROM {s}.steps WHERE run_id IN (SELECT id FROM doomed)
            ), d_payloads AS (
                DELETE FROM {s}.payloads WHERE run_id IN (SELECT id FROM doomed)
            ), d_signals AS (
                DELETE FROM {s}.signals WHERE run_id IN (SELECT id FROM doomed)
            ), d_runs AS (
                DELETE FROM {s}.runs WHERE id IN (SELECT id FROM doomed) RETURNING 1
            ) SELECT count(*) FROM d_runs"""
        row = await self._fetchone("pruning runs", sql, params)
        return int(row[0]) if row else 0

    # -- steps ------------------------------------------------------------------
    async def load_steps(self, run_id: str) -> dict[str, StepRecord]:
        async def fn(conn: Conn, n: int) -> dict[str, StepRecord]:
            return await self._load_steps(conn, run_id, None)

        return await self._with_conn(f"reading the steps of run {_q(run_id)}", fn)

    async def _load_steps(self, conn: Conn, run_id: str, key: str | None) -> dict[str, StepRecord]:
        s = self._sql.s
        if key is None:
            cur = await conn.execute(
                f"SELECT {_STEP_COLUMNS} FROM {s}.steps WHERE run_id = %s", (run_id,)
            )
        else:
            cur = await conn.execute(
                f"SELECT {_STEP_COLUMNS} FROM {s}.steps WHERE run_id = %s AND key = %s",
                (run_id, key),
            )
        steps: dict[str, StepRecord] = {}
        spilled = False
        for r in await cur.fetchall():
            steps[r[0]] = _step(r)
            spilled = spilled or bool(r[10])
        if spilled:
            if key is None:
                cur = await conn.execute(
                    f"SELECT key, field, data FROM {s}.payloads WHERE run_id = %s", (run_id,)
                )
            else:
                cur = await conn.execute(
                    f"SELECT key, field, data FROM {s}.payloads WHERE run_id = %s AND key = %s",
                    (run_id, key),
                )
            for k, fld, data in await cur.fetchall():
                if k in steps:
                    setattr(steps[k], fld, data)
        return steps

    async def record_step(self, run_id: str, fence: int, step: StepRecord) -> StepRecord:
        if self._pool is None:
            raise StoreError("the PostgreSQL store is not open")
        values: dict[str, str | None] = {
            "args": step.args,
            "output": step.output,
            "error": step.error,
        }
        spilled = 0
        for fld, bit in SPILL_FIELDS:
            v = values[fld]
            if v is not None and len(v) > SPILL_BYTES:
                spilled |= bit
                values[fld] = None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[StepRecord] = loop.create_future()
        self._pending.append(
            _Pending(
                run_id, fence, step, values["args"], values["output"], values["error"], spilled, fut
            )
        )
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

    def _fail(self, batch: list[_Pending], exc: BaseException) -> None:
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

    async def _write_batch(self, batch: list[_Pending]) -> None:
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
            if not _refused_for_good(exc):
                raise
            if len(batch) == 1:
                p = batch[0]
                raise StoreError(
                    f"run {_q(p.run_id)}: step {p.step.key} cannot be recorded: {exc}"
                ) from exc
            half = len(batch) // 2
            for part in (batch[:half], batch[half:]):
                try:
                    await self._write_batch(part)
                except Exception as part_exc:
                    self._fail(part, part_exc)

    async def _write_together(self, batch: list[_Pending]) -> None:
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
        unique: list[_Pending] = []
        later: list[_Pending] = []  # a key twice in one batch: the first one decides
        seen: set[tuple[str, str]] = set()
        for p in batch:
            k = (p.run_id, p.step.key)
            if k in seen:
                later.append(p)
            else:
                seen.add(k)
                unique.append(p)
        unique.sort(key=lambda p: p.run_id)  # lock runs in one order: no deadlocks
        sent: list[_Pending] = []
        token: str | None = None

        async def attempt(n: int, deadline: float) -> list[tuple[Any, ...]]:
            nonlocal sent, token
            conn = await self._step_connection()
            token = self._token
            at_risk = self._lost or self._unsynced  # never with durability=commit
            sent = [p for p in unique if not self._doomed(p, token)] if at_risk else unique
            if not sent:
                return []
            sql, params = self._statement(sent)
            try:
                cur = await conn.execute(sql, params)
                return await cur.fetchall()
            except psycopg.Error:
                if conn.broken or conn.closed:
                    self._step_conn = None
                    with contextlib.suppress(Exception):
                        await conn.close()
                raise

        rows = await self._retrying("recording steps", attempt)
        inserted = {(r[0], r[1]) for r in rows}
        held_back = set() if sent is unique else set(map(id, unique)) - set(map(id, sent))
        slow: list[_Pending] = []
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
                            f"run {_q(p.run_id)}: step {p.step.key} could not be recorded "
                            f"in {MAX_ROUNDS} tries, and nothing refused it"
                        )
                    )
                    p.future.exception()

    def _statement(self, sent: list[_Pending]) -> tuple[str, list[Any]]:
        """The statement that records ``sent``, and its parameters."""
        rows = [
            (
                p.run_id,
                p.fence,
                p.step.key,
                p.step.name,
                p.step.kind,
                p.step.args_hash,
                p.args,
                p.output,
                p.error,
                p.step.attempts,
                p.step.started_at,
                p.step.finished_at,
                p.spilled,
            )
            for p in sent
        ]
        big = [
            (p.run_id, p.step.key, fld, getattr(p.step, fld))
            for p in sent
            if p.spilled
            for fld, bit in SPILL_FIELDS
            if p.spilled & bit
        ]
        sql = self._sql.record(len(rows), bool(big))
        params: list[Any]
        if len(rows) > SMALL_BATCH:
            params = _columns(rows, 13)
        else:
            params = [value for row in rows for value in row]
        if big:
            params += _columns(big, 4)
        return sql, params

    def _doomed(self, p: _Pending, token: str | None) -> bool:
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

    def _acknowledged(self, p: _Pending, token: str) -> None:
        """Note that ``p`` was committed asynchronously in server life ``token``."""
        noted = self._unsynced.get(p.run_id)
        if noted is None or noted[0] != p.fence:
            self._unsynced[p.run_id] = (p.fence, token)

    def _lost_error(self, run_id: str, what: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"run {_q(run_id)}: {what} refused: the PostgreSQL server at {self.where} "
            "crashed or failed over since this execution's last records were acknowledged "
            "(durability=group), so some may be lost; the run resumes by replay from the "
            "records that survived"
        )

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

    async def _settle(self, p: _Pending) -> StepRecord | None:
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

        async def fn(conn: Conn, n: int) -> StepRecord | None:
            cur = await conn.execute(
                f"SELECT fence, status FROM {self._sql.s}.runs WHERE id = %s", (p.run_id,)
            )
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

        return await self._with_conn(f"reading step {p.step.key} of run {_q(p.run_id)}", fn)

    def _check_step_fence(self, p: _Pending, row: tuple[Any, ...] | None) -> None:
        """Raise StaleLeaseError unless the run (``fence, status``) is still
        running under ``p``'s fence."""
        what = f"run {_q(p.run_id)}: step {p.step.key} refused"
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

    # -- signals ----------------------------------------------------------------
    async def send_signal(self, run_id: str, name: str, payload: str) -> RunRecord:
        now = time.time()
        uid = uuid.uuid4().hex  # makes a retried send idempotent
        s = self._sql.s

        async def fn(conn: Conn, n: int) -> RunRecord:
            async with conn.transaction():
                cur = await conn.execute(
                    f"SELECT status FROM {s}.runs WHERE id = %s FOR UPDATE", (run_id,)
                )
                row = await cur.fetchone()
                if row is None:
                    raise RunNotFound(f"no run {_q(run_id)}")
                sent = False
                if n > 1:
                    cur = await conn.execute(f"SELECT 1 FROM {s}.signals WHERE uid = %s", (uid,))
                    sent = await cur.fetchone() is not None
                if not sent:
                    if row[0] in TERMINAL:
                        raise StoreError(
                            f"run {_q(run_id)} has finished ({row[0]}); it takes no signals"
                        )
                    await conn.execute(
                        f"INSERT INTO {s}.signals (uid, run_id, name, payload, created_at) "
                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (uid) DO NOTHING",
                        (uid, run_id, name, payload, now),
                    )
                    await conn.execute(
                        f"UPDATE {s}.runs SET status = 'pending', wake_at = NULL, "
                        "waiting_for = NULL, updated_at = %s WHERE id = %s "
                        "AND status = 'suspended' AND waiting_for = %s",
                        (now, run_id, name),
                    )
                cur = await conn.execute(self._sql.get_run, (run_id,))
                got = await cur.fetchone()
                assert got is not None
                return run_from_row(got)

        return await self._with_conn(f"sending signal {_q(name)} to run {_q(run_id)}", fn)

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        row = await self._fetchone(
            f"taking signal {_q(name)} for run {_q(run_id)}",
            self._sql.take_signal,
            {"run": run_id, "name": name, "key": step_key},
        )
        return None if row is None else str(row[0])


class _Sql:
    """The statements that depend on the schema name, built once."""

    def __init__(self, s: str) -> None:
        self.s = s
        self.get_run = f"SELECT {RUN_COLUMNS} FROM {s}.runs WHERE id = %s"
        self.create_run = (
            f"INSERT INTO {s}.runs ({RUN_COLUMNS}) VALUES "
            "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
            f"ON CONFLICT (id) DO NOTHING RETURNING {RUN_COLUMNS}"
        )
        self.create_runs = (
            f"INSERT INTO {s}.runs ({RUN_COLUMNS}) SELECT * FROM unnest("
            "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::float8[], %s::float8[], %s::text[], %s::float8[], %s::text[], %s::text[], "
            "%s::float8[], %s::int8[], %s::bool[], %s::text[], %s::int4[], %s::text[]) "
            "ON CONFLICT (id) DO NOTHING"
        )
        self.claim = f"""UPDATE {s}.runs SET owner = %(owner)s,
                lease_expires_at = {_NOW} + %(lease)s, fence = fence + 1, status = 'running',
                wake_at = NULL, waiting_for = NULL, updated_at = %(now)s
            WHERE id = %(id)s AND NOT cancel_requested AND (
                (status = 'pending' AND (wake_at IS NULL OR wake_at <= %(now)s))
                OR (status = 'suspended' AND wake_at IS NOT NULL AND wake_at <= %(now)s)
                OR (status = 'running'
                    AND (lease_expires_at < {_NOW} OR owner = ANY(%(owners)s::text[])))
            ) RETURNING {RUN_COLUMNS}"""
        # claim_due's three candidate lists, each served by its own index.
        in_queues = "(%(all)s OR queue = ANY(%(queues)s::text[]))"
        self.abandoned = f"""SELECT {RUN_COLUMNS} FROM {s}.runs
            WHERE status = 'running'
              AND (lease_expires_at < {_NOW} OR owner = ANY(%(dead)s::text[]))
              AND {in_queues}
            LIMIT 4 * %(n)s"""
        self.abandoned_lock = f"""SELECT {RUN_COLUMNS} FROM {s}.runs
            WHERE id = ANY(%(ids)s::text[]) AND status = 'running'
              AND (lease_expires_at < {_NOW} OR owner = ANY(%(dead)s::text[]))
            FOR UPDATE SKIP LOCKED"""
        self.pending = f"""SELECT {RUN_COLUMNS} FROM {s}.runs
            WHERE status = 'pending' AND NOT cancel_requested
              AND (wake_at IS NULL OR wake_at <= %(now)s)
              AND {in_queues} AND queue <> ALL(%(dry)s::text[])
            ORDER BY priority DESC, created_at LIMIT %(n)s FOR UPDATE SKIP LOCKED"""
        self.woken = f"""SELECT {RUN_COLUMNS} FROM {s}.runs
            WHERE status = 'suspended' AND wake_at <= %(now)s AND NOT cancel_requested
              AND {in_queues} AND queue <> ALL(%(busy)s::text[])
            ORDER BY priority DESC, created_at LIMIT %(n)s FOR UPDATE SKIP LOCKED"""
        # Lock in id order, as step records do, so the two never deadlock.
        self.heartbeat = f"""UPDATE {s}.runs SET lease_expires_at = {_NOW} + %s
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

    def record(self, n: int, big: bool) -> str:
        """One statement that records ``n`` steps (and their spilled values).

        A row goes in only if its run still has the writer's fence, checked
        under a share lock (a claim bumping the fence waits for us, or we see
        its new fence), and only if its key has no record yet (the first
        result wins, S3). It returns the keys it inserted; why any other was
        left out is asked afterwards (:meth:`PostgresStore._settle`), off the
        hot path. A small batch (the usual: one step) is sent as
        scalar parameters in a VALUES list; a large one as one array per
        column (see :func:`_columns`), which the server parses far faster.
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


def _where(params: dict[str, Any]) -> str:
    """host:port/db for messages, never the password."""
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    db = params.get("dbname") or params.get("user") or ""
    return f"{host}:{port}/{db}"


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[Any]:
    """Rows as one list per column, for ``unnest``."""
    return [[row[i] for row in rows] for i in range(width)]


def _refused_for_good(exc: Exception) -> bool:
    """Whether the server (or libpq) refused a statement for something in
    its data: an error that another statement, with other data, may not meet."""
    return type(exc) is StoreError and isinstance(exc.__cause__, psycopg.Error)


def _classified(exc: psycopg.Error, what: str) -> StoreError:
    """``exc`` as the store error a runner acts on: transient or for good."""
    kind = StoreUnavailable if _transient(exc) else StoreError
    return kind(f"{what}: {type(exc).__name__}: {_short(exc)}")


def _q(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, cut short if long (a run id of 10 KB
    must not bury the error that names it)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _short(exc: BaseException, limit: int = 500) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + " ..."


def _mask(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
