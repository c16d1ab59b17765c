"""The SQLite store's long-term memory (SQL in :mod:`stalwart.stores.sql.memory`).

Each write is one transaction: the ``memory`` row and its FTS5 entry in
``memory_text`` together, so the index never holds text the table lost.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...core.memory import MemoryRecord
from ..sql import SQLITE
from ..sql.memory import MEMORY_COLUMNS, MemoryStatements, masks, memory_from_row, memory_row
from .writer import SQLiteBase

__all__ = ["SQLiteMemory"]

_SQL = MemoryStatements(SQLITE)
_FORGET = "DELETE FROM memory_text WHERE rowid = ?"
_INDEX = "INSERT INTO memory_text (rowid, text) VALUES (?, ?)"
# Any of the words (each quoted: no word is read as FTS5 syntax), best first;
# bm25 is lower for a better match, so the score is its negation.
_SEARCH = (
    f"SELECT {', '.join('m.' + c.strip() for c in MEMORY_COLUMNS.split(','))}, "
    "-bm25(memory_text) AS score FROM memory_text JOIN memory m ON m.id = memory_text.rowid "
    "WHERE memory_text MATCH ? AND m.namespace = ? ORDER BY score DESC, m.key LIMIT ?"
)


class SQLiteMemory(SQLiteBase):
    """Memory in the file's ``memory`` and ``memory_text`` tables."""

    async def memory_put(self, record: MemoryRecord) -> None:
        def put(db: sqlite3.Connection) -> None:
            (row_id,) = db.execute(_SQL.put, memory_row(record)).fetchone()
            db.execute(_FORGET, (row_id,))
            db.execute(_INDEX, (row_id, record.text))

        await self._write(put)

    async def memory_insert(self, record: MemoryRecord) -> bool:
        def insert(db: sqlite3.Connection) -> bool:
            row = db.execute(_SQL.insert, memory_row(record)).fetchone()
            if row is not None:
                db.execute(_INDEX, (row[0], record.text))
            return row is not None

        return await self._write(insert)

    async def memory_get(self, namespace: str, key: str) -> MemoryRecord | None:
        rows = self._read(_SQL.get, (namespace, key))
        return memory_from_row(rows[0]) if rows else None

    async def memory_list(self, namespace: str, limit: int) -> list[MemoryRecord]:
        return [memory_from_row(r) for r in self._read(_SQL.list, (namespace, limit))]

    async def memory_namespaces(self, after: str, limit: int) -> list[str]:
        return [str(r[0]) for r in self._read(_SQL.namespaces, (after, limit))]

    async def memory_search_text(
        self, namespace: str, words: Sequence[str], limit: int
    ) -> list[tuple[MemoryRecord, float]]:
        match = " OR ".join(f'"{w}"' for w in words)
        rows = self._read(_SEARCH, (match, namespace, limit))
        return [(memory_from_row(r), float(r[7])) for r in rows]

    async def memory_vectors(self, namespace: str) -> list[MemoryRecord]:
        return [memory_from_row(r) for r in self._read(_SQL.vectors, (namespace,))]

    async def memory_delete(self, namespace: str, key: str) -> bool:
        def delete(db: sqlite3.Connection) -> bool:
            ids = db.execute(_SQL.delete, (namespace, key)).fetchall()
            db.executemany(_FORGET, ids)
            return bool(ids)

        return await self._write(delete)

    async def memory_drop(self, namespace: str, keep_run: str | None = None) -> tuple[int, int]:
        def drop(db: sqlite3.Connection) -> tuple[int, int]:
            ids = db.execute(_SQL.drop, (namespace,)).fetchall()
            db.executemany(_FORGET, ids)
            found = masks(db.execute(_SQL.copies).fetchall(), namespace, keep_run)
            for mask in found:
                db.execute(_SQL.mask, mask.params())
                for field in mask.unspill:
                    db.execute(_SQL.unspill, (mask.run_id, mask.key, field))
            return len(ids), len(found)

        return await self._write(drop)
