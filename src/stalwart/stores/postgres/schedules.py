"""The PostgreSQL store's recurring schedules (SQL in :mod:`stalwart.stores.sql.schedules`).

Every operation is one statement in autocommit, retried on transient
failures like the rest of the store; each is safe to repeat (a create is
``ON CONFLICT DO NOTHING``, an advance a compare-and-set).
"""

from __future__ import annotations

import time
from typing import Any

from ..base import ScheduleRecord, schedule_from_row
from ..sql import quoted
from ..sql.schedules import ScheduleStatements, definition_row, due_params, schedule_row
from .connection import Conn, PostgresBase

__all__ = ["PostgresSchedules"]


class PostgresSchedules(PostgresBase):
    """Schedules in the store schema's ``schedules`` table."""

    @property
    def _schedule_sql(self) -> ScheduleStatements:
        built: ScheduleStatements | None = self.__dict__.get("_schedule_statements")
        if built is None:
            built = self.__dict__["_schedule_statements"] = ScheduleStatements(self._sql.dialect)
        return built

    async def _changed(self, what: str, sql: str, params: tuple[object, ...]) -> bool:
        async def fn(conn: Conn, n: int) -> bool:
            cur = await conn.execute(sql, params)
            return cur.rowcount == 1

        return await self._with_conn(what, fn)

    async def create_schedule(self, schedule: ScheduleRecord) -> tuple[ScheduleRecord, bool]:
        sql = self._schedule_sql

        async def fn(conn: Conn, n: int) -> tuple[ScheduleRecord, bool]:
            cur = await conn.execute(sql.insert, schedule_row(schedule))
            # A retry whose first attempt did insert finds its own row: the
            # same schedule either way, so "new" may read False then.
            created = cur.rowcount == 1
            row = await (await conn.execute(sql.get, (schedule.name,))).fetchone()
            assert row is not None
            return schedule_from_row(row), created

        return await self._with_conn(f"creating schedule {quoted(schedule.name)}", fn)

    async def redefine_schedule(self, schedule: ScheduleRecord, retime: bool) -> bool:
        return await self._changed(
            f"redefining schedule {quoted(schedule.name)}",
            self._schedule_sql.redefine,
            definition_row(schedule, retime),
        )

    async def get_schedule(self, name: str) -> ScheduleRecord | None:
        row = await self._fetchone(
            f"reading schedule {quoted(name)}", self._schedule_sql.get, (name,)
        )
        return None if row is None else schedule_from_row(row)

    async def list_schedules(self, limit: int = 1000, check: bool = True) -> list[ScheduleRecord]:
        rows = await self._fetchall("listing schedules", self._schedule_sql.list, (limit,))
        return [schedule_from_row(r, check) for r in rows]

    async def due_schedules(
        self, now: float, limit: int, after: tuple[Any, str] | None = None
    ) -> list[ScheduleRecord]:
        sql = self._schedule_sql.due if after is None else self._schedule_sql.due_after
        rows = await self._fetchall("reading due schedules", sql, due_params(now, limit, after))
        return [schedule_from_row(r, check=False) for r in rows]

    async def advance_schedule(
        self, name: str, expected: int, next_at: int, last_at: int | None
    ) -> bool:
        return await self._changed(
            f"advancing schedule {quoted(name)}",
            self._schedule_sql.advance,
            (next_at, last_at, time.time(), name, expected),
        )

    async def pause_schedule(self, name: str, paused: bool, next_at: int | None) -> bool:
        return await self._changed(
            f"{'pausing' if paused else 'resuming'} schedule {quoted(name)}",
            self._schedule_sql.pause,
            (paused, next_at, time.time(), name),
        )

    async def delete_schedule(self, name: str) -> bool:
        return await self._changed(
            f"deleting schedule {quoted(name)}", self._schedule_sql.delete, (name,)
        )
