"""The PostgreSQL store's versions (SQL in :mod:`stalwart.stores.sql.versions`).

Each operation is one statement in autocommit, or one transaction, retried on
transient failures like the rest of the store; each is safe to repeat.
Naming the latest version or retiring one is announced on the schema's
``versions`` channel (:mod:`.listen`), so serving workers learn it at once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ...core.ledger import RunRecord
from ..base import run_from_row
from ..sql import quoted
from ..sql.versions import VersionStatements
from ..versions import (
    FORGET_AFTER,
    VersionRecord,
    WorkerRecord,
    version_from_row,
    with_cleared,
    worker_from_row,
    worker_row,
)
from .connection import Conn, PostgresBase

__all__ = ["PostgresVersions"]


class PostgresVersions(PostgresBase):
    """Workers and versions in the store schema's ``workers`` and ``versions`` tables."""

    @property
    def _version_sql(self) -> VersionStatements:
        built: VersionStatements | None = self.__dict__.get("_version_statements")
        if built is None:
            built = self.__dict__["_version_statements"] = VersionStatements(self._sql.dialect)
        return built

    async def beat_worker(self, worker: WorkerRecord) -> list[VersionRecord]:
        sql = self._version_sql

        async def fn(conn: Conn, n: int) -> list[VersionRecord]:
            async with conn.transaction():
                await conn.execute(sql.beat, worker_row(worker))
                await conn.execute(sql.seen, (worker.version, worker.beat_at, worker.version))
                await conn.execute(sql.forget_silent, (worker.beat_at - FORGET_AFTER,))
                rows = await (await conn.execute(sql.versions)).fetchall()
            return [version_from_row(r) for r in rows]

        return await self._with_conn(f"recording worker {quoted(worker.owner)}", fn)

    async def forget_worker(self, owner: str) -> None:
        await self._execute(
            f"forgetting worker {quoted(owner)}", self._version_sql.forget, (owner,)
        )

    async def _execute(self, what: str, sql: str, params: tuple[object, ...]) -> None:
        async def fn(conn: Conn, n: int) -> None:
            await conn.execute(sql, params)

        await self._with_conn(what, fn)

    async def list_workers(self) -> list[WorkerRecord]:
        rows = await self._fetchall("listing workers", self._version_sql.workers)
        return [worker_from_row(r) for r in rows]

    async def list_versions(self) -> list[VersionRecord]:
        rows = await self._fetchall("listing versions", self._version_sql.versions)
        return [version_from_row(r) for r in rows]

    async def set_latest(self, version: str) -> None:
        sql = self._version_sql

        lock = f"LOCK TABLE {self._sql.s}.versions IN EXCLUSIVE MODE"

        async def fn(conn: Conn, n: int) -> None:
            async with conn.transaction():
                # One at a time: two operators naming the latest at once would
                # each clear the old one, and the second insert break the
                # index's one latest (reads and beats' reads go on meanwhile).
                await conn.execute(lock)
                await conn.execute(sql.unlatest, (version,))
                await conn.execute(sql.latest, (version, time.time()))

        await self._with_conn(f"making version {quoted(version)} the latest", fn)
        self._announce("versions")  # serving workers learn it now, not at their next beat

    async def retire_version(self, version: str) -> None:
        now = time.time()
        await self._execute(
            f"retiring version {quoted(version)}", self._version_sql.retire, (version, now, now)
        )
        self._announce("versions")

    async def clear_run(
        self, run_id: str, versions: Sequence[str], fence: int | None = None
    ) -> RunRecord | None:
        sql = self._version_sql

        async def fn(conn: Conn, n: int) -> RunRecord | None:
            async with conn.transaction():
                cur = await conn.execute(sql.cleared_of + " FOR UPDATE", (run_id,))
                row = await cur.fetchone()
                if row is None:
                    return None
                merged = with_cleared(row[0], versions)
                if fence is None:
                    cur = await conn.execute(sql.clear, (merged, run_id))
                else:
                    cur = await conn.execute(sql.clear_fenced, (merged, run_id, fence))
                got = await cur.fetchone()
            return None if got is None else run_from_row(got)

        return await self._with_conn(f"clearing run {quoted(run_id)}", fn)

    async def pin_run(
        self, run_id: str, code_version: str, fence: int | None = None
    ) -> RunRecord | None:
        sql = self._version_sql
        if fence is None:
            row = await self._fetchone(
                f"pinning run {quoted(run_id)}", sql.pin, (code_version, time.time(), run_id)
            )
        else:
            row = await self._fetchone(
                f"pinning run {quoted(run_id)}", sql.pin_fenced, (code_version, run_id, fence)
            )
        return None if row is None else run_from_row(row)
