"""The PostgreSQL store's connections, retries and fences.

The store's other modules (runs, claims, steps, signals) are mixins of
:class:`PostgresBase` and share its pool, its step connection and its
``durability=group`` bookkeeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...core.errors import StoreError, StoreUnavailable
from ...core.ledger import StoredStep
from ..base import Store
from ..outages import Outages
from ..sql import fence_refusal, quoted
from ..sql.provisioning import migrate_option
from .schema import (
    OPTIONS,
    SCHEMA_NAME,
    Conn,
    check,
    classified,
    ddl,
    incarnation,
    mask,
    migrate,
    short,
    stored_version,
    transient,
    where_of,
)
from .statements import PgStatements

__all__ = ["Conn", "Pending", "PostgresBase"]

T = TypeVar("T")

#: Seconds a batch of notifications may wait for a pooled connection, and
#: that closing the store waits for the last batch.
ANNOUNCE_TIMEOUT = 1.0


def _noting(sink: list[psycopg.Error]) -> type[Conn]:
    """The pool's connection class, noting in ``sink`` why the last new
    connection failed (emptied when one succeeds): the pool itself only says
    it had none in time (``PoolTimeout``), and the store's errors give the
    server's words (a dropped database, a refused password) instead."""

    class Noting(psycopg.AsyncConnection[TupleRow]):
        @classmethod
        async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                conn = await super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                sink[:] = [exc]
                raise
            sink.clear()
            return conn

    return Noting


@dataclass(slots=True, eq=False)
class Pending:
    """A step record waiting for the step writer (``durability=group``)."""

    run_id: str
    fence: int
    step: StoredStep
    args: str | None
    output: str | None
    error: str | None
    spilled: int
    future: asyncio.Future[StoredStep] = field(repr=False)
    rounds: int = 0  # batches it went out in without a verdict


class PostgresBase(Store):
    """The pool, the retries and the fences every part of the PostgreSQL store uses."""

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
        migrate: bool = True,
        url: str | None = None,
    ) -> None:
        if not SCHEMA_NAME.match(schema):
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
        # False (migrate=false): the operator creates and migrates the tables
        # (``stalwart store ddl``); open() only checks their version.
        self.migrate = migrate
        try:
            params = conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as exc:
            raise StoreError(f"bad PostgreSQL URL: {exc}") from None
        self.where = where_of(params)
        self._connect_kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._connect_kwargs["connect_timeout"] = 5
        if "application_name" not in params:
            self._connect_kwargs["application_name"] = "stalwart"
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._step_conn: Conn | None = None
        self._step_cur: psycopg.AsyncCursor[TupleRow] | None = None  # on _step_conn
        self._closing = False
        self._pending: list[Pending] = []
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
        self._outages = Outages()
        self._dead_owners: set[str] = set()
        # Claims of one store run one at a time: a runner's recovery and its
        # background loop may both claim, and a claim must reach the runner
        # (which marks the run live) before the next one can judge "ours but
        # not live".
        self._claiming = asyncio.Lock()
        self._checking: asyncio.Task[None] | None = None
        self._sql = PgStatements(f'"{schema}"')
        # Notifications to send once the writes they announce committed
        # (channel -> payloads), and the task sending them (see _announce).
        self._announcing: dict[str, set[str]] = {}
        self._announcer: asyncio.Task[None] | None = None
        # Why the pool's last new connection failed, and when (see _noting).
        self._connect_failed: list[psycopg.Error] = []

    @classmethod
    def from_url(cls, url: str) -> Self:
        """``postgresql://user@host:port/db?schema=...&pool_max=...``; see the module doc."""
        parts = urlsplit(url)
        ours: dict[str, str] = {}
        theirs: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in OPTIONS:
                ours[key] = value
            else:
                theirs.append((key, value))
        conninfo = urlunsplit(parts._replace(query=urlencode(theirs)))
        kwargs: dict[str, Any] = {}
        for key, value in ours.items():
            if key in ("schema", "durability"):
                kwargs[key] = value
            elif key == "migrate":
                kwargs[key] = migrate_option(value)
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
            if self.migrate:
                await migrate(conn, self._sql.s, self.schema, self.where)
            else:
                await check(conn, self._sql.s, self.schema, self.where, mask(self.url))
            self._step_conn = await self._for_steps(conn)
        except psycopg.Error as exc:
            await conn.close()
            raise classified(exc, f"PostgreSQL at {self.where}: cannot set up the schema") from exc
        except BaseException:
            await conn.close()
            raise
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self.conninfo,
            min_size=self.pool_min,
            max_size=self.pool_max,
            kwargs=self._connect_kwargs,
            connection_class=_noting(self._connect_failed),
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

    async def ddl(self) -> str:
        """The SQL that brings the schema's tables to the code's schema
        version (all of them for a schema without tables); only reads."""
        conn = await self._connect()
        try:
            found = await stored_version(conn, self._sql.s)
        except psycopg.Error as exc:
            raise classified(exc, f"PostgreSQL at {self.where}: cannot read the schema") from exc
        finally:
            await conn.close()
        return ddl(found, self._sql.s, self.schema, self.where)

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
                self._token = await incarnation(conn, self._sql.s)
        except BaseException:  # cancelled or failed half-way: never leak the socket
            await conn.close()
            raise
        return conn

    async def close(self) -> None:
        self._closing = True  # a connection still being made is closed, not kept
        if self._writer is not None:
            await asyncio.wait([self._writer])  # pending step records are written first
        # Each task is held in a local across its await: a close running at
        # the same time (two owners of one store) may clear the attribute.
        announcer = self._announcer
        if announcer is not None:
            # Announce what was written, briefly: a listener polls anyway.
            await asyncio.wait([announcer], timeout=ANNOUNCE_TIMEOUT)
            announcer.cancel()
            if self._announcer is announcer:
                self._announcer = None
        checking, self._checking = self._checking, None
        if checking is not None:
            checking.cancel()
            await asyncio.wait([checking])
        self._step_cur = None
        if self._step_conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._step_conn.close()
            self._step_conn = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            with contextlib.suppress(psycopg.Error):
                await pool.close()

    @property
    def outages(self) -> Outages:
        """How long PostgreSQL could not be reached: from an operation's first
        transient failure to the next attempt, of any operation, that succeeds."""
        return self._outages

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "url": mask(self.url),
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

    # -- wake-ups -------------------------------------------------------------------
    def _announce(self, kind: str, payload: str = "") -> None:
        """Tell the runners listening to this schema (see :mod:`.listen`)
        that a write of ``kind`` ("ready", "cancel", "settled", "versions")
        committed.

        Called once the write has committed, so no listener can hear of a
        row before it can read it. Notifications wait here while one batch
        is in flight and go out together, one statement a batch, committed
        without waiting for the disk (see ``PgStatements.announce``); the
        same one twice is sent once. A batch that fails is dropped: the
        listeners' poll finds what it announced.
        """
        self._announcing.setdefault(self._sql.channel[kind], set()).add(payload)
        if self._announcer is None or self._announcer.done():
            self._announcer = asyncio.get_running_loop().create_task(self._send_announcements())

    async def _send_announcements(self) -> None:
        while self._announcing and self._pool is not None:
            pool = self._pool
            pending, self._announcing = self._announcing, {}
            pairs = [(c, p) for c, payloads in pending.items() for p in payloads]
            try:
                async with pool.connection(timeout=ANNOUNCE_TIMEOUT) as conn:
                    await conn.execute(
                        self._sql.announce, ([c for c, _ in pairs], [p for _, p in pairs])
                    )
            except (psycopg.Error, OSError):
                return

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
        began = time.monotonic()
        deadline = began + self.retry_for
        n = 0
        delay = 0.02
        while True:
            n += 1
            try:
                result = await attempt(n, deadline)
            except psycopg.Error as exc:
                if not transient(exc):
                    raise classified(exc, f"PostgreSQL at {self.where}: {what}") from exc
                self._outages.failed()
                pause = delay * (0.5 + random.random())
                if time.monotonic() + pause > deadline:
                    raise StoreUnavailable(
                        f"PostgreSQL at {self.where}: {what} failed after {n} attempt"
                        f"{'s' if n > 1 else ''} over {self.retry_for:g} s: "
                        f"{type(exc).__name__}: {short(exc)}{self._why_no_connection(exc)}"
                    ) from exc
                self.retries += 1
                self._check_pool()
                await asyncio.sleep(pause)
                delay = min(delay * 2, 1.0)
            else:
                self._outages.answered()  # one comparison while the store answers
                return result

    def _why_no_connection(self, exc: psycopg.Error) -> str:
        """For a pool that had no connection in time: what the server said to
        its last attempt to make one, unless one was made since. (The pool
        backs off between attempts, so the last may predate this operation.)"""
        if not isinstance(exc, PoolTimeout) or not self._connect_failed:
            return ""
        return f"; its last new connection failed: {short(self._connect_failed[0])}"

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

    # -- fences ---------------------------------------------------------------------
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
        cur = await conn.execute(self._sql.fence_status, (run_id,))
        refused = fence_refusal(run_id, fence, await cur.fetchone(), what)
        if refused is not None:
            raise refused

    def _lost_error(self, run_id: str, what: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"run {quoted(run_id)}: {what} refused: the PostgreSQL server at {self.where} "
            "crashed or failed over since this execution's last records were acknowledged "
            "(durability=group), so some may be lost; the run resumes by replay from the "
            "records that survived"
        )
