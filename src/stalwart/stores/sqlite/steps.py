"""The SQLite store's step records: first write wins (S3), in order (S6)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Collection

from ...core.errors import StaleLeaseError, StoreError
from ...core.ledger import StoredStep
from ..sql import STEP, merge_payloads, step_from_row
from ..sql.columns import KEYS_A_READ, count_and_positions, positions_args
from .schema import UNBINDABLE
from .writer import SQLiteBase

__all__ = ["SQLiteSteps"]

_SPILLED = STEP["spilled"]


class SQLiteSteps(SQLiteBase):
    """Step records: inserted into the open transaction, committed in groups."""

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

    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        if self._lost:
            self._refuse_lost(run_id, fence, f"step {step.key}")
        await self._begin()
        db = self.db
        try:
            if self._insert(db, run_id, fence, step):
                self._batch.append((run_id, fence, step))
                await self._committed()
                return step
            # Refused or already recorded: the rare path, which may cost a query.
            winner = self._winner(db, run_id, fence, step.key)
        except sqlite3.Error as exc:
            error = self._error(f"recording step {step.key} of run {run_id!r}", exc)
            self._abort(error)  # the step's row may be in without its payloads
            raise error from exc
        except UNBINDABLE as exc:
            error = StoreError(
                f"SQLite store {self.path!r}: step {step.key} of run {run_id!r} "
                f"cannot be stored: {exc}"
            )
            self._abort(error)
            raise error from exc
        except BaseException:
            self._end_unless_batched()  # a refused write: nothing of ours to undo
            raise
        self._end_unless_batched()
        return winner

    def _winner(self, db: sqlite3.Connection, run_id: str, fence: int, key: str) -> StoredStep:
        """The record already kept for ``key``, if ``fence`` still holds the run.

        A stale writer must not learn the new owner's results (it would go on
        executing the run's later steps as if it still held it): it is told
        that it lost the run instead.
        """
        row = db.execute(self.sql.fence_status, (run_id,)).fetchone()
        if row is None or tuple(row) != (fence, "running"):
            now = "gone" if row is None else "fence {}, {}".format(*row)
            raise StaleLeaseError(
                f"run {run_id!r}: step {key} refused, fencing token {fence} is stale (now {now})"
            )
        # The fence holds, in this very transaction: the insert was refused
        # because this row exists.
        found = db.execute(self.sql.step_by_key, (run_id, key)).fetchone()
        steps = {key: step_from_row(found)}
        if found[_SPILLED]:
            merge_payloads(steps, db.execute(self.sql.payloads_by_key, (run_id, key)))
        return steps[key]
