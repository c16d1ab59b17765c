"""The columns of a run's and a step's row, and where each sits, by name.

The select lists are built from the record dataclasses' own field names, so
a row selected with them builds its record field by field by construction;
code that needs one column of a row reads it through :data:`RUN` or
:data:`STEP` (a position looked up once, at import), never through a number
written by hand. A dictionary per row (``sqlite3.Row``, psycopg's
``dict_row``) would cost every read on the hot path; this costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from typing import Any

from ...core.ledger import RunRecord, StoredStep
from ...core.mail import GENERATION_KEY
from ..base import RUN_COLUMNS

__all__ = [
    "KEYS_A_READ",
    "RUN",
    "RUN_FIELDS",
    "STEP",
    "STEP_COLUMNS",
    "STEP_FIELDS",
    "count_and_positions",
    "positions_args",
    "step_from_row",
]

RUN_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RunRecord))
# base.RUN_COLUMNS (the select list every store uses) must name the same
# fields in the same order, or run_from_row would put values in wrong fields.
if tuple(c.strip() for c in RUN_COLUMNS.split(",")) != RUN_FIELDS:  # pragma: no cover
    raise ImportError("stores.base.RUN_COLUMNS no longer matches RunRecord's fields")

STEP_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(StoredStep))
# A step's row: its record's fields, then which of them were spilled.
STEP_COLUMNS = ", ".join((*STEP_FIELDS, "spilled"))

RUN: dict[str, int] = {name: i for i, name in enumerate(RUN_FIELDS)}
STEP: dict[str, int] = {name: i for i, name in enumerate((*STEP_FIELDS, "spilled"))}
_STEP_WIDTH = len(STEP_FIELDS)


def step_from_row(row: Sequence[Any]) -> StoredStep:
    """The step of a row selected with :data:`STEP_COLUMNS`, as stored."""
    return StoredStep(*row[:_STEP_WIDTH])


def count_and_positions(rows: Iterable[Sequence[Any]]) -> tuple[int, dict[str, float]]:
    """The rows of ``Statements.step_positions`` taken apart: the run's step
    count, and the finish time of each step returned, by key.

    The statement's first column is the count on the count's one row and
    NULL on every step's row, which is ``key, finished_at`` after it.
    """
    count = 0
    times: dict[str, float] = {}
    for row in rows:
        if row[0] is not None:  # the count's row
            count = int(row[0])
        else:
            times[row[1]] = row[2]
    return count, times


def positions_args(run_id: str, known: int, since: float) -> tuple[object, ...]:
    """The parameters of ``Statements.step_positions``, in the order its
    branches take them (the count, the steps since, the generation's record)."""
    return (run_id, known, run_id, since, run_id, GENERATION_KEY)


#: Most keys one read of steps by key names (SQLite's older builds allow
#: 999 parameters a statement).
KEYS_A_READ = 500
