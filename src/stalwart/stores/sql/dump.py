"""The SQL that moves a whole run between stores, written once for both.

An export reads the run's row, its steps (spilled values merged back by the
caller) and its signals; an import inserts all of them in one transaction,
spilling large values again by the store's own rule, so an imported run is
kept exactly as a run recorded there would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.ledger import StoredStep
from ..base import RUN_COLUMNS, SignalRecord
from .rules import spilled_values, split_spill
from .statements import Dialect

__all__ = ["DumpStatements", "payload_rows", "signal_from_row", "step_row"]

_SIGNAL_COLUMNS = "name, payload, consumed_by, uid, created_at"


class DumpStatements:
    """Export and import statements in one dialect."""

    def __init__(self, d: Dialect) -> None:
        q = d.sql
        marks = ",".join("?" * len(RUN_COLUMNS.split(",")))
        self.insert_run = q(
            f"INSERT INTO {{t}}runs ({RUN_COLUMNS}) VALUES ({marks}) ON CONFLICT (id) DO NOTHING"
        )
        self.insert_step = q(
            "INSERT INTO {t}steps (run_id, key, name, kind, args_hash, args, output, error, "
            "attempts, started_at, finished_at, spilled) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
        )
        self.insert_payload = q(
            "INSERT INTO {t}payloads (run_id, key, field, data) VALUES (?, ?, ?, ?)"
        )
        self.insert_signal = q(
            f"INSERT INTO {{t}}signals (run_id, {_SIGNAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        )
        self.signals_of_run = q(
            f"SELECT {_SIGNAL_COLUMNS} FROM {{t}}signals WHERE run_id = ? ORDER BY id"
        )


def step_row(run_id: str, step: StoredStep) -> tuple[tuple[Any, ...], int]:
    """The values of ``insert_step`` for ``step``, and its spill bits.

    The arguments as the source store kept them (compact: core/stepargs.py),
    so an imported run is no larger than the run it copies.
    """
    args, output, error, spilled = split_spill(step)
    row = (
        run_id,
        step.key,
        step.name,
        step.kind,
        step.args_hash,
        args,
        output,
        error,
        step.attempts,
        step.started_at,
        step.finished_at,
        spilled,
    )
    return row, spilled


def payload_rows(run_id: str, step: StoredStep, spilled: int) -> list[tuple[str, str, str, str]]:
    """The ``payloads`` rows of a step whose large values left its row."""
    return [(run_id, step.key, fld, data) for fld, data in spilled_values(step, spilled)]


def signal_from_row(run_id: str, row: Sequence[Any]) -> SignalRecord:
    name, payload, consumed_by, uid, created_at = row
    return SignalRecord(run_id, name, payload, consumed_by, uid, float(created_at or 0.0))
