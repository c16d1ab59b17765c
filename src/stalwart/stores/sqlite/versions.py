"""The SQLite store's versions (SQL in :mod:`stalwart.stores.sql.versions`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from ...core.ledger import RunRecord
from ..base import run_from_row
from ..sql import SQLITE
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
from .writer import SQLiteBase

__all__ = ["SQLiteVersions"]

_SQL = VersionStatements(SQLITE)


class SQLiteVersions(SQLiteBase):
    """Workers and versions in the file's ``workers`` and ``versions`` tables."""

    async def beat_worker(self, worker: WorkerRecord) -> list[VersionRecord]:
        def beat(db: sqlite3.Connection) -> list[VersionRecord]:
            db.execute(_SQL.beat, worker_row(worker))
            db.execute(_SQL.seen, (worker.version, worker.beat_at, worker.version))
            db.execute(_SQL.forget_silent, (worker.beat_at - FORGET_AFTER,))
            return [version_from_row(r) for r in db.execute(_SQL.versions).fetchall()]

        return await self._write(beat)

    async def forget_worker(self, owner: str) -> None:
        await self._write(lambda db: db.execute(_SQL.forget, (owner,)))

    async def list_workers(self) -> list[WorkerRecord]:
        return [worker_from_row(r) for r in self._read(_SQL.workers)]

    async def list_versions(self) -> list[VersionRecord]:
        return [version_from_row(r) for r in self._read(_SQL.versions)]

    async def set_latest(self, version: str) -> None:
        def latest(db: sqlite3.Connection) -> None:
            db.execute(_SQL.unlatest, (version,))
            db.execute(_SQL.latest, (version, time.time()))

        await self._write(latest)

    async def retire_version(self, version: str) -> None:
        now = time.time()
        await self._write(lambda db: db.execute(_SQL.retire, (version, now, now)))

    async def clear_run(
        self, run_id: str, versions: Sequence[str], fence: int | None = None
    ) -> RunRecord | None:
        def clear(db: sqlite3.Connection) -> RunRecord | None:
            row = db.execute(_SQL.cleared_of, (run_id,)).fetchone()
            if row is None:
                return None
            merged = with_cleared(row[0], versions)
            if fence is None:
                got = db.execute(_SQL.clear, (merged, run_id)).fetchone()
            else:
                got = db.execute(_SQL.clear_fenced, (merged, run_id, fence)).fetchone()
            return None if got is None else run_from_row(got)

        return await self._write(clear)

    async def pin_run(
        self, run_id: str, code_version: str, fence: int | None = None
    ) -> RunRecord | None:
        def pin(db: sqlite3.Connection) -> RunRecord | None:
            if fence is None:
                row = db.execute(_SQL.pin, (code_version, time.time(), run_id)).fetchone()
            else:
                row = db.execute(_SQL.pin_fenced, (code_version, run_id, fence)).fetchone()
            return None if row is None else run_from_row(row)

        return await self._write(pin)
