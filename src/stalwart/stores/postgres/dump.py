"""The PostgreSQL store's whole-run export and import (``stalwart.timetravel``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from ...core.ledger import StoredStep
from ..base import Reseal, RunDump, run_from_row, run_to_row
from ..sql import merge_payloads, quoted, step_from_row
from ..sql.dump import DumpStatements, payload_rows, signal_from_row, step_row
from ..sql.reseal import ResealStatements
from .connection import Conn, PostgresBase

__all__ = ["PostgresDump"]


class PostgresDump(PostgresBase):
    """Reads a run with everything it recorded in one snapshot; writes one
    in one transaction."""

    @property
    def _dump_sql(self) -> DumpStatements:
        built: DumpStatements | None = self.__dict__.get("_dump_statements")
        if built is None:
            built = self.__dict__["_dump_statements"] = DumpStatements(self._sql.dialect)
        return built

    async def export_run(self, run_id: str) -> RunDump | None:
        sql, dump = self._sql, self._dump_sql

        async def fn(conn: Conn, n: int) -> RunDump | None:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                row = await (await conn.execute(sql.get_run, (run_id,))).fetchone()
                if row is None:
                    return None
                steps: dict[str, StoredStep] = {}
                for r in await (await conn.execute(sql.steps_of_run, (run_id,))).fetchall():
                    step = step_from_row(r)
                    steps[step.key] = step
                payloads = await (await conn.execute(sql.payloads_of_run, (run_id,))).fetchall()
                merge_payloads(steps, payloads)
                cur = await conn.execute(dump.signals_of_run, (run_id,))
                signals = [signal_from_row(run_id, r) for r in await cur.fetchall()]
            return RunDump(run_from_row(row), list(steps.values()), signals)

        return await self._with_conn(f"exporting run {quoted(run_id)}", fn)

    async def import_run(self, run_dump: RunDump) -> bool:
        sql = self._dump_sql
        run_id = run_dump.run.id

        async def fn(conn: Conn, n: int) -> bool:
            async with conn.transaction():
                cur = await conn.execute(sql.insert_run, run_to_row(run_dump.run))
                if cur.rowcount != 1:
                    return False
                if run_dump.run.tags is not None:
                    await conn.execute(self._sql.insert_tags, (run_id, run_dump.run.tags))
                async with conn.cursor() as c:
                    for step in run_dump.steps:
                        row, spilled = step_row(run_id, step)
                        await c.execute(sql.insert_step, row)
                        payloads = payload_rows(run_id, step, spilled)
                        if payloads:
                            await c.executemany(sql.insert_payload, payloads)
                    for s in run_dump.signals:
                        # A uid names one send in one store (see SQLiteDump).
                        uid = s.uid or uuid.uuid4().hex
                        await c.execute(self._sql.signal_sent, (uid,))
                        if await c.fetchone():
                            uid = uuid.uuid4().hex
                        await c.execute(
                            sql.insert_signal,
                            (run_id, s.name, s.payload, s.consumed_by, uid, s.created_at),
                        )
            return True

        return await self._with_conn(f"importing run {quoted(run_id)}", fn)

    async def reseal(self, changes: Sequence[Reseal]) -> int:
        built: ResealStatements | None = self.__dict__.get("_reseal_statements")
        if built is None:
            built = self.__dict__["_reseal_statements"] = ResealStatements(self._sql.dialect)
        sql = built

        async def fn(conn: Conn, n: int) -> int:
            done = 0
            async with conn.transaction():
                for change in changes:
                    for statement, params in sql.updates(change):
                        done += (await conn.execute(statement, params)).rowcount
            return done

        return await self._with_conn("rewriting values", fn)
