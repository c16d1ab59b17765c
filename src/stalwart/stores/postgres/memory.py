"""The PostgreSQL store's long-term memory (SQL in :mod:`stalwart.stores.sql.memory`).

Text search reads the generated ``search`` column (``tsvector``, GIN
indexed) with ``websearch_to_tsquery``: the query's words joined by ``or``,
so any of them matches and no word is read as query syntax. Vectors are
kept as JSON and scored in Python (:class:`~stalwart.core.memory.Memory`);
pgvector is not used. Every operation is retried on transient failures;
each is safe to repeat (a put is an upsert, a drop deletes what is left, an
insert retried finds its own row).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.memory import MemoryRecord
from ..sql.memory import MEMORY_COLUMNS, MemoryStatements, masks, memory_from_row, memory_row
from .connection import Conn, PostgresBase

__all__ = ["PostgresMemory"]


class PostgresMemory(PostgresBase):
    """Memory in the store schema's ``memory`` table."""

    @property
    def _memory_sql(self) -> MemoryStatements:
        built: MemoryStatements | None = self.__dict__.get("_memory_statements")
        if built is None:
            built = self.__dict__["_memory_statements"] = MemoryStatements(self._sql.dialect)
        return built

    async def memory_put(self, record: MemoryRecord) -> None:
        sql = self._memory_sql.put

        async def fn(conn: Conn, n: int) -> None:
            await conn.execute(sql, memory_row(record))

        await self._with_conn("writing memory", fn)

    async def memory_insert(self, record: MemoryRecord) -> bool:
        sql = self._memory_sql.insert

        async def fn(conn: Conn, n: int) -> bool:
            cur = await conn.execute(sql, memory_row(record))
            if await cur.fetchall():
                return True
            if n == 1:
                return False
            # A retry: the first attempt may have committed before its reply
            # was lost. The row it finds is ours if it is the one we wrote.
            cur = await conn.execute(self._memory_sql.get, (record.namespace, record.key))
            row = await cur.fetchone()
            if row is None:
                return False
            found = memory_from_row(row)
            return (found.value, found.text, found.created_at) == (
                record.value,
                record.text,
                record.created_at,
            )

        return await self._with_conn("writing memory", fn)

    async def memory_get(self, namespace: str, key: str) -> MemoryRecord | None:
        row = await self._fetchone("reading memory", self._memory_sql.get, (namespace, key))
        return None if row is None else memory_from_row(row)

    async def memory_list(self, namespace: str, limit: int) -> list[MemoryRecord]:
        rows = await self._fetchall("listing memory", self._memory_sql.list, (namespace, limit))
        return [memory_from_row(r) for r in rows]

    async def memory_namespaces(self, after: str, limit: int) -> list[str]:
        sql = self._memory_sql.namespaces
        rows = await self._fetchall("listing memory namespaces", sql, (after, limit))
        return [str(r[0]) for r in rows]

    async def memory_search_text(
        self, namespace: str, words: Sequence[str], limit: int
    ) -> list[tuple[MemoryRecord, float]]:
        sql = (
            f"SELECT {MEMORY_COLUMNS}, ts_rank(search, q) AS score "
            f"FROM {self._sql.s}.memory, websearch_to_tsquery('english', %s) q "
            "WHERE namespace = %s AND search @@ q ORDER BY score DESC, key LIMIT %s"
        )
        rows = await self._fetchall("searching memory", sql, (" or ".join(words), namespace, limit))
        return [(memory_from_row(r), float(r[7])) for r in rows]

    async def memory_vectors(self, namespace: str) -> list[MemoryRecord]:
        rows = await self._fetchall("reading memory", self._memory_sql.vectors, (namespace,))
        return [memory_from_row(r) for r in rows]

    async def memory_delete(self, namespace: str, key: str) -> bool:
        sql = self._memory_sql.delete

        async def fn(conn: Conn, n: int) -> bool:
            cur = await conn.execute(sql, (namespace, key))
            return bool(await cur.fetchall())

        return await self._with_conn("deleting memory", fn)

    async def memory_drop(self, namespace: str, keep_run: str | None = None) -> tuple[int, int]:
        sql = self._memory_sql

        async def fn(conn: Conn, n: int) -> tuple[int, int]:
            async with conn.transaction():
                cur = await conn.execute(sql.drop, (namespace,))
                rows = len(await cur.fetchall())
                cur = await conn.execute(sql.copies)
                found = masks(await cur.fetchall(), namespace, keep_run)
                for mask in found:
                    await conn.execute(sql.mask, mask.params())
                    for field in mask.unspill:
                        await conn.execute(sql.unspill, (mask.run_id, mask.key, field))
            return rows, len(found)

        return await self._with_conn("deleting a memory namespace", fn)
