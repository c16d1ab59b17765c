"""The SQLite store's step reads: a run's records, as stored (for replay)
or whole, a page at a time. Step records are written by :mod:`.writer`."""

from __future__ import annotations

import math
from collections.abc import Collection

from ...core.ledger import StoredStep
from ..sql import STEP, merge_payloads, step_from_row
from ..sql.columns import KEYS_A_READ, count_and_positions, positions_args
from .writer import SQLiteBase

__all__ = ["SQLiteSteps"]

_SPILLED = STEP["spilled"]


class SQLiteSteps(SQLiteBase):
    """Step reads (the writes are :class:`~.writer.SQLiteBase`'s)."""

    async def load_stored_steps(self, run_id: str) -> dict[str, StoredStep]:
        steps: dict[str, StoredStep] = {}
        spilled = False
        for row in self._read(self.sql.steps_of_run, (run_id,)):
            step = step_from_row(row)
            steps[step.key] = step
            spilled = spilled or bool(row[_SPILLED])
        if spilled:
            merge_payloads(steps, self._read(self.sql.payloads_of_run, (run_id,)))
        return steps

    async def step_positions(
        self, run_id: str, known: int = -1, since: float = -math.inf
    ) -> tuple[int, dict[str, float]]:
        rows = self._read(self.sql.step_positions, positions_args(run_id, known, since))
        return count_and_positions(rows)

    async def stored_steps_by_key(
        self, run_id: str, keys: Collection[str]
    ) -> dict[str, StoredStep]:
        wanted = list(dict.fromkeys(keys))
        steps: dict[str, StoredStep] = {}
        spilled: list[str] = []
        for at in range(0, len(wanted), KEYS_A_READ):
            chunk = wanted[at : at + KEYS_A_READ]
            for row in self._read(self.sql.steps_by_keys(len(chunk)), (run_id, *chunk)):
                step = step_from_row(row)
                steps[step.key] = step
                if row[_SPILLED]:
                    spilled.append(step.key)
        for key in spilled:
            merge_payloads(steps, self._read(self.sql.payloads_by_key, (run_id, key)))
        return steps
