"""The SQLite store's recurring schedules (SQL in :mod:`stalwart.stores.sql.schedules`)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from ..base import ScheduleRecord, schedule_from_row
from ..sql import SQLITE
from ..sql.schedules import ScheduleStatements, definition_row, due_params, schedule_row
from .writer import SQLiteBase

__all__ = ["SQLiteSchedules"]

_SQL = ScheduleStatements(SQLITE)


class SQLiteSchedules(SQLiteBase):
    """Schedules in the file's ``schedules`` table; each write is one transaction."""

    async def create_schedule(self, schedule: ScheduleRecord) -> tuple[ScheduleRecord, bool]:
        def insert(db: sqlite3.Connection) -> tuple[ScheduleRecord, bool]:
            created = db.execute(_SQL.insert, schedule_row(schedule)).rowcount == 1
            row = db.execute(_SQL.get, (schedule.name,)).fetchone()
            return schedule_from_row(row), created

        return await self._write(insert)

    async def redefine_schedule(self, schedule: ScheduleRecord, retime: bool) -> bool:
        params = definition_row(schedule, retime)
        return await self._write(lambda db: db.execute(_SQL.redefine, params).rowcount == 1)

    async def get_schedule(self, name: str) -> ScheduleRecord | None:
        rows = self._read(_SQL.get, (name,))
        return schedule_from_row(rows[0]) if rows else None

    async def list_schedules(self, limit: int = 1000, check: bool = True) -> list[ScheduleRecord]:
        return [schedule_from_row(r, check) for r in self._read(_SQL.list, (limit,))]

    async def due_schedules(
        self, now: float, limit: int, after: tuple[Any, str] | None = None
    ) -> list[ScheduleRecord]:
        sql = _SQL.due if after is None else _SQL.due_after
        rows = self._read(sql, due_params(now, limit, after))
        return [schedule_from_row(r, check=False) for r in rows]

    async def advance_schedule(
        self, name: str, expected: int, next_at: int, last_at: int | None
    ) -> bool:
        params = (next_at, last_at, time.time(), name, expected)
        return await self._write(lambda db: db.execute(_SQL.advance, params).rowcount == 1)

    async def pause_schedule(self, name: str, paused: bool, next_at: int | None) -> bool:
        params = (paused, next_at, time.time(), name)
        return await self._write(lambda db: db.execute(_SQL.pause, params).rowcount == 1)

    async def delete_schedule(self, name: str) -> bool:
        return await self._write(lambda db: db.execute(_SQL.delete, (name,)).rowcount == 1)
