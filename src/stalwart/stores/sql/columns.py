"""The columns of a run's and a step's row, and where each sits, by name.

The select lists are built from the record dataclasses' own field names, so
a row selected with them builds its record field by field by construction;
code that needs one column of a row reads it through :data:`RUN` or
:data:`STEP` (a position looked up once, at import), never through a number
written by hand. A dictionary per row (``sqlite3.Row``, psycopg's
``dict_row``) would cost every read on the hot path; this costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from ...core.ledger import RunRecord, StepRecord
from ..base import RUN_COLUMNS

__all__ = ["RUN", "RUN_FIELDS", "STEP", "STEP_COLUMNS", "STEP_FIELDS", "step_from_row"]

RUN_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RunRecord))
# base.RUN_COLUMNS (the select list every store uses) must name the same
# fields in the same order, or run_from_row would put values in wrong fields.
if tuple(c.strip() for c in RUN_COLUMNS.split(",")) != RUN_FIELDS:  # pragma: no cover
    raise ImportError("stores.base.RUN_COLUMNS no longer matches RunRecord's fields")

STEP_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(StepRecord))
# A step's row: its record's fields, then which of them were spilled.
STEP_COLUMNS = ", ".join((*STEP_FIELDS, "spilled"))

RUN: dict[str, int] = {name: i for i, name in enumerate(RUN_FIELDS)}
STEP: dict[str, int] = {name: i for i, name in enumerate((*STEP_FIELDS, "spilled"))}
_STEP_WIDTH = len(STEP_FIELDS)


def step_from_row(row: Sequence[Any]) -> StepRecord:
    """The StepRecord of a row selected with :data:`STEP_COLUMNS`."""
    return StepRecord(*row[:_STEP_WIDTH])
