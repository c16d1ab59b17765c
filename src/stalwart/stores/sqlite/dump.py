"""The SQLite store's whole-run export and import (``stalwart.timetravel``)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence

from ...core.ledger import StoredStep
from ..base import Reseal, RunDump, run_from_row, run_to_row
from ..sql import SQLITE, merge_payloads, step_from_row
from ..sql.dump import DumpStatements, payload_rows, signal_from_row, step_row
from ..sql.reseal import ResealStatements
from .writer import SQLiteBase

__all__ = ["SQLiteDump"]

_RESEAL = ResealStatements(SQLITE)
# The full-text index keeps its own copy of a memory row's text.
_REINDEX = (
    "DELETE FROM memory_text WHERE rowid = (SELECT id FROM memory WHERE namespace = ? AND key = ?)",
    "INSERT INTO memory_text (rowid, text) SELECT id, text FROM memory "
    "WHERE namespace = ? AND key = ?",
)


class SQLiteDump(SQLiteBase):
    """Reads a run with everything it recorded; writes one in one transaction."""

    @property
    def _dump_sql(self) -> DumpStatements:
        built: DumpStatements | None = self.__dict__.get("_dump_statements")
        if built is None:
            built = self.__dict__["_dump_statements"] = DumpStatements(self.sql.dialect)
        return built

    async def export_run(self, run_id: str) -> RunDump | None:
        rows = self._read(self.sql.get_run, (run_id,))
        if not rows:
            return None
        steps: dict[str, StoredStep] = {}
        for row in self._read(self.sql.steps_of_run, (run_id,)):
            step = step_from_row(row)
            steps[step.key] = step
        merge_payloads(steps, self._read(self.sql.payloads_of_run, (run_id,)))
        signals = [
            signal_from_row(run_id, r) for r in self._read(self._dump_sql.signals_of_run, (run_id,))
        ]
        return RunDump(run_from_row(rows[0]), list(steps.values()), signals)

    async def import_run(self, dump: RunDump) -> bool:
        sql = self._dump_sql
        run_id = dump.run.id

        def insert(db: sqlite3.Connection) -> bool:
            if db.execute(sql.insert_run, run_to_row(dump.run)).rowcount != 1:
                return False
            if dump.run.tags is not None:
                db.execute(self.sql.insert_tags, (run_id, dump.run.tags))
            for step in dump.steps:
                row, spilled = step_row(run_id, step)
                db.execute(sql.insert_step, row)
                db.executemany(sql.insert_payload, payload_rows(run_id, step, spilled))
            for s in dump.signals:
                # A uid names one send in one store; one taken here (the same
                # export imported under another id) is not this send's.
                taken = s.uid is not None and db.execute(self.sql.signal_sent, (s.uid,)).fetchone()
                uid = uuid.uuid4().hex if taken or s.uid is None else s.uid
                db.execute(
                    sql.insert_signal, (run_id, s.name, s.payload, s.consumed_by, uid, s.created_at)
                )
            return True

        return await self._write(insert)

    async def reseal(self, changes: Sequence[Reseal]) -> int:
        def rewrite(db: sqlite3.Connection) -> int:
            done = 0
            for change in changes:
                for sql, params in _RESEAL.updates(change):
                    done += db.execute(sql, params).rowcount
                if change.table == "memory" and change.field == "text":
                    for sql in _REINDEX:
                        db.execute(sql, (change.owner, change.key))
            return done

        return await self._write(rewrite)
