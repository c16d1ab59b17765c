"""The SQL of long-term memory (:mod:`stalwart.core.memory`), written once
for both SQL stores, and how a deleted namespace's ledger copies are masked.

A ``memory`` row is one value at ``(namespace, key)``: the namespace as its
JSON list, the value as JSON, the text search reads, the vector (a JSON list
of floats) when an embedding model wrote it. Text search is each store's
own (SQLite FTS5 in a ``memory_text`` table keyed by the row's id, kept in
the same transaction; a generated ``tsvector`` column in PostgreSQL); a
vector search reads the namespace's vectors and scores them in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.memory import (
    MASKED_ARGS,
    MEMORY_STEPS,
    MemoryRecord,
    masked_output,
    names_namespace,
)
from ..base import SPILL_FIELDS
from .statements import Dialect

__all__ = ["MEMORY_COLUMNS", "Mask", "MemoryStatements", "masks", "memory_from_row", "memory_row"]

MEMORY_COLUMNS = "namespace, key, value, text, vector, created_at, updated_at"
_ARGS_BIT = SPILL_FIELDS[0][1]
_OUTPUT_BIT = SPILL_FIELDS[1][1]


class MemoryStatements:
    """The memory statements in one dialect, built once."""

    def __init__(self, d: Dialect) -> None:
        q = d.sql
        self.put = q(
            f"INSERT INTO {{t}}memory ({MEMORY_COLUMNS}) VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, "
            "text = excluded.text, vector = excluded.vector, updated_at = excluded.updated_at "
            "RETURNING id"
        )
        self.insert = q(
            f"INSERT INTO {{t}}memory ({MEMORY_COLUMNS}) VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT (namespace, key) DO NOTHING RETURNING id"
        )
        self.get = q(f"SELECT {MEMORY_COLUMNS} FROM {{t}}memory WHERE namespace = ? AND key = ?")
        self.namespaces = q(
            "SELECT DISTINCT namespace FROM {t}memory WHERE namespace > ? "
            "ORDER BY namespace LIMIT ?"
        )
        self.list = q(
            f"SELECT {MEMORY_COLUMNS} FROM {{t}}memory WHERE namespace = ? "
            "ORDER BY updated_at DESC, key LIMIT ?"
        )
        self.vectors = q(
            f"SELECT {MEMORY_COLUMNS} FROM {{t}}memory WHERE namespace = ? AND vector IS NOT NULL"
        )
        self.delete = q("DELETE FROM {t}memory WHERE namespace = ? AND key = ? RETURNING id")
        self.drop = q("DELETE FROM {t}memory WHERE namespace = ? RETURNING id")
        names = ", ".join(f"'{n}'" for n in MEMORY_STEPS)
        # The records a drop may mask: every memory step's, its arguments
        # read back from payloads when they were spilled. Unindexed on
        # purpose: a drop is rare, and no step write pays for an index.
        self.copies = q(
            "SELECT s.run_id, s.key, s.name, s.spilled, s.args, p.data, s.output "
            "FROM {t}steps s LEFT JOIN {t}payloads p "
            "ON p.run_id = s.run_id AND p.key = s.key AND p.field = 'args' "
            f"WHERE s.name IN ({names})"
        )
        self.mask = q(
            "UPDATE {t}steps SET args = ?, output = ?, spilled = ? WHERE run_id = ? AND key = ?"
        )
        self.unspill = q("DELETE FROM {t}payloads WHERE run_id = ? AND key = ? AND field = ?")


def memory_row(rec: MemoryRecord) -> tuple[object, ...]:
    """The values of ``put`` for ``rec``, in :data:`MEMORY_COLUMNS` order."""
    return (
        rec.namespace,
        rec.key,
        rec.value,
        rec.text,
        rec.vector,
        rec.created_at,
        rec.updated_at,
    )


def memory_from_row(row: Sequence[Any]) -> MemoryRecord:
    """A MemoryRecord from a row selected with :data:`MEMORY_COLUMNS` first."""
    return MemoryRecord(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        None if row[4] is None else str(row[4]),
        float(row[5]),
        float(row[6]),
    )


@dataclass(slots=True)
class Mask:
    """One step record to mask: its new ``args``, ``output`` and spill bits,
    and the payload fields to delete."""

    run_id: str
    key: str
    output: str | None
    spilled: int
    unspill: tuple[str, ...]

    def params(self) -> tuple[object, ...]:
        """The values of ``mask``."""
        return (MASKED_ARGS, self.output, self.spilled, self.run_id, self.key)


def masks(rows: Sequence[Sequence[Any]], namespace: str, keep_run: str | None = None) -> list[Mask]:
    """The records among ``copies`` rows that hold ``namespace``'s data,
    but for run ``keep_run``'s."""
    out: list[Mask] = []
    for run_id, key, name, spilled, args, spilled_args, output in rows:
        if run_id == keep_run:
            continue
        if not names_namespace(args if args is not None else spilled_args, namespace):
            continue
        bits = int(spilled) & ~_ARGS_BIT
        unspill = ["args"] if int(spilled) & _ARGS_BIT else []
        new_output = masked_output(str(name), output)
        if new_output is not output and int(spilled) & _OUTPUT_BIT:
            bits &= ~_OUTPUT_BIT
            unspill.append("output")
        out.append(Mask(str(run_id), str(key), new_output, bits, tuple(unspill)))
    return out
