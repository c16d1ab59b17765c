"""The SQL of recurring schedules, written once for both SQL stores.

A ``schedules`` row is data only: the policy by its registered name, the
runs' inputs as JSON, the timing (a cron expression and its time zone, or an
interval), the next tick, the paused flag. Ticking is the runner's business
(:mod:`stalwart.schedules`); the store gives it two guarantees: a
schedule is created once per name, and moving its next tick is a
compare-and-set (``advance``), so of the workers that race on one tick
exactly one moves it.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..base import SCHEDULE_COLUMNS, ScheduleRecord
from .statements import Dialect

__all__ = ["ScheduleStatements", "definition_row", "due_params", "schedule_row"]


class ScheduleStatements:
    """The schedule statements in one dialect, built once."""

    def __init__(self, d: Dialect) -> None:
        q = d.sql
        marks = ",".join("?" * len(SCHEDULE_COLUMNS.split(",")))
        self.insert = q(
            f"INSERT INTO {{t}}schedules ({SCHEDULE_COLUMNS}) VALUES ({marks}) "
            "ON CONFLICT (name) DO NOTHING"
        )
        self.get = q(f"SELECT {SCHEDULE_COLUMNS} FROM {{t}}schedules WHERE name = ?")
        self.list = q(f"SELECT {SCHEDULE_COLUMNS} FROM {{t}}schedules ORDER BY name LIMIT ?")
        # The partial index on next_at (WHERE NOT paused) serves this.
        self.due = q(
            f"SELECT {SCHEDULE_COLUMNS} FROM {{t}}schedules WHERE NOT paused AND next_at <= ? "
            "ORDER BY next_at, name LIMIT ?"
        )
        # The next page of them: a poll reads one page, the next poll the
        # following one, so schedules no worker here can tick (another
        # application's policy, a corrupted row) never hide the others.
        self.due_after = q(
            f"SELECT {SCHEDULE_COLUMNS} FROM {{t}}schedules WHERE NOT paused AND next_at <= ? "
            "AND (next_at > ? OR (next_at = ? AND name > ?)) ORDER BY next_at, name LIMIT ?"
        )
        # A new definition; the next tick moves only when the timing changed
        # (a NULL keeps it: CAST so that PostgreSQL knows the parameter's type).
        self.redefine = q(
            "UPDATE {t}schedules SET policy = ?, inputs = ?, cron = ?, every = ?, timezone = ?, "
            "missed = ?, grace = ?, queue = ?, priority = ?, tags = ?, "
            "next_at = COALESCE(CAST(? AS BIGINT), next_at), updated_at = ? WHERE name = ?"
        )
        self.advance = q(
            "UPDATE {t}schedules SET next_at = ?, last_at = ?, updated_at = ? "
            "WHERE name = ? AND next_at = ? AND NOT paused"
        )
        self.pause = q(
            "UPDATE {t}schedules SET paused = ?, "
            "next_at = COALESCE(CAST(? AS BIGINT), next_at), updated_at = ? WHERE name = ?"
        )
        self.delete = q("DELETE FROM {t}schedules WHERE name = ?")


def schedule_row(s: ScheduleRecord) -> tuple[object, ...]:
    """The values of ``insert`` for ``s``, in :data:`SCHEDULE_COLUMNS` order."""
    return (
        s.name,
        s.policy,
        s.inputs,
        s.cron,
        s.every,
        s.timezone,
        s.missed,
        s.grace,
        s.queue,
        s.priority,
        s.next_at,
        s.last_at,
        s.paused,
        s.created_at,
        s.updated_at,
        s.tags,
    )


def due_params(now: float, limit: int, after: tuple[Any, str] | None) -> tuple[object, ...]:
    """The values of ``due`` (``after`` None) or ``due_after``."""
    if after is None:
        return (math.floor(now), limit)
    return (math.floor(now), after[0], after[0], after[1], limit)


def definition_row(s: ScheduleRecord, retime: bool) -> tuple[object, ...]:
    """The values of ``redefine`` for ``s``."""
    return (
        s.policy,
        s.inputs,
        s.cron,
        s.every,
        s.timezone,
        s.missed,
        s.grace,
        s.queue,
        s.priority,
        s.tags,
        s.next_at if retime else None,
        time.time(),
        s.name,
    )
