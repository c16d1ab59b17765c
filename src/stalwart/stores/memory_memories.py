"""The memory store's long-term memory: the SQL stores' rules, in a dict.

Text search matches words as they are written (the SQL stores also match a
word's other forms: "walks" finds "walking"), and scores a row by how many of
the query's words it holds. A drop masks the store's step records as the SQL
stores mask theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..core.ledger import StoredStep
from ..core.memory import (
    MASKED_ARGS,
    MEMORY_STEPS,
    MemoryRecord,
    masked_output,
    names_namespace,
    scan_text,
)

__all__ = ["MemoryMemories"]


class MemoryMemories:
    """Memory rows by namespace, then key; records copied in and out."""

    _memory: dict[str, dict[str, MemoryRecord]]
    _steps: dict[str, dict[str, StoredStep]]

    async def memory_put(self, record: MemoryRecord) -> None:
        rows = self._memory.setdefault(record.namespace, {})
        known = rows.get(record.key)
        created = record.created_at if known is None else known.created_at
        rows[record.key] = replace(record, created_at=created)

    async def memory_get(self, namespace: str, key: str) -> MemoryRecord | None:
        known = self._memory.get(namespace, {}).get(key)
        return None if known is None else replace(known)

    async def memory_list(self, namespace: str, limit: int) -> list[MemoryRecord]:
        rows = sorted(self._memory.get(namespace, {}).values(), key=lambda r: r.key)
        rows.sort(key=lambda r: r.updated_at, reverse=True)
        return [replace(r) for r in rows[:limit]]

    async def memory_namespaces(self, after: str, limit: int) -> list[str]:
        return sorted(n for n, rows in self._memory.items() if rows and n > after)[:limit]

    async def memory_search_text(
        self, namespace: str, words: Sequence[str], limit: int
    ) -> list[tuple[MemoryRecord, float]]:
        rows = self._memory.get(namespace, {}).values()
        return [(replace(rec), score) for rec, score in scan_text(rows, words, limit)]

    async def memory_vectors(self, namespace: str) -> list[MemoryRecord]:
        rows = self._memory.get(namespace, {}).values()
        return [replace(r) for r in rows if r.vector is not None]

    async def memory_delete(self, namespace: str, key: str) -> bool:
        rows = self._memory.get(namespace, {})
        found = rows.pop(key, None) is not None
        if not rows:
            self._memory.pop(namespace, None)
        return found

    async def memory_drop(self, namespace: str, keep_run: str | None = None) -> tuple[int, int]:
        rows = len(self._memory.pop(namespace, {}))
        masked = 0
        for run_id, steps in self._steps.items():
            if run_id == keep_run:
                continue
            for key, step in steps.items():
                if step.name in MEMORY_STEPS and names_namespace(step.args, namespace):
                    output = masked_output(step.name, step.output)
                    steps[key] = replace(step, args=MASKED_ARGS, output=output)
                    masked += 1
        return rows, masked
