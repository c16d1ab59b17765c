"""The memory store's recurring schedules: the SQL stores' rules, in a dict.

Nothing ticks in memory (a runner without a durable store has no worker
loop); the store keeps them so that the ticking code and the Store contract
are exercised the same way on every store.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

from .base import ScheduleRecord

__all__ = ["MemorySchedules"]


class MemorySchedules:
    """Schedules by name; records copied in and out, as with a database."""

    _schedules: dict[str, ScheduleRecord]

    async def create_schedule(self, schedule: ScheduleRecord) -> tuple[ScheduleRecord, bool]:
        known = self._schedules.get(schedule.name)
        if known is not None:
            return replace(known), False
        self._schedules[schedule.name] = replace(schedule)
        return replace(schedule), True

    async def redefine_schedule(self, schedule: ScheduleRecord, retime: bool) -> bool:
        known = self._schedules.get(schedule.name)
        if known is None:
            return False
        self._schedules[schedule.name] = replace(
            schedule,
            next_at=schedule.next_at if retime else known.next_at,
            last_at=known.last_at,
            paused=known.paused,
            created_at=known.created_at,
            updated_at=time.time(),
        )
        return True

    async def get_schedule(self, name: str) -> ScheduleRecord | None:
        known = self._schedules.get(name)
        return None if known is None else replace(known)

    async def list_schedules(self, limit: int = 1000, check: bool = True) -> list[ScheduleRecord]:
        return [replace(self._schedules[n]) for n in sorted(self._schedules)[:limit]]

    async def due_schedules(
        self, now: float, limit: int, after: tuple[Any, str] | None = None
    ) -> list[ScheduleRecord]:
        cutoff = math.floor(now)
        due = [s for s in self._schedules.values() if not s.paused and s.next_at <= cutoff]
        if after is not None:
            due = [s for s in due if (s.next_at, s.name) > after]
        due.sort(key=lambda s: (s.next_at, s.name))
        return [replace(s) for s in due[:limit]]

    async def advance_schedule(
        self, name: str, expected: int, next_at: int, last_at: int | None
    ) -> bool:
        known = self._schedules.get(name)
        if known is None or known.paused or known.next_at != expected:
            return False
        known.next_at, known.last_at, known.updated_at = next_at, last_at, time.time()
        return True

    async def pause_schedule(self, name: str, paused: bool, next_at: int | None) -> bool:
        known = self._schedules.get(name)
        if known is None:
            return False
        known.paused = paused
        if next_at is not None:
            known.next_at = next_at
        known.updated_at = time.time()
        return True

    async def delete_schedule(self, name: str) -> bool:
        return self._schedules.pop(name, None) is not None
