"""The SQL of :meth:`~stalwart.stores.base.Store.reseal`, written once for both stores.

Each change is a compare-and-set ``UPDATE``: the field takes its new text
only where it still holds the old one, so a rewrite that races a writer (or
is done again after a crash) changes nothing it should not. A step's value
too large for its row lives in ``payloads``: both places are tried, and
only the one holding the old text changes.
"""

from __future__ import annotations

from ..base import Reseal
from .statements import Dialect

__all__ = ["ResealStatements"]

_FIELDS = {
    "runs": ("id", None, ("inputs", "result", "error")),
    "steps": ("run_id", "key", ("args", "output", "error")),
    "signals": ("run_id", "name", ("payload",)),
    "schedules": ("name", None, ("inputs",)),
    "memory": ("namespace", "key", ("value", "text", "vector")),
}


class ResealStatements:
    """The compare-and-set updates of one dialect, by table and field."""

    def __init__(self, dialect: Dialect) -> None:
        self._sql: dict[tuple[str, str], str] = {}
        for table, (owner, key, fields) in _FIELDS.items():
            for field in fields:
                where = f"{owner} = ?" + ("" if key is None else f" AND {key} = ?")
                self._sql[(table, field)] = dialect.sql(
                    f"UPDATE {{t}}{table} SET {field} = ? WHERE {where} AND {field} = ?"
                )
        self.payload = dialect.sql(
            "UPDATE {t}payloads SET data = ? WHERE run_id = ? AND key = ? AND field = ? "
            "AND data = ?"
        )

    def updates(self, change: Reseal) -> list[tuple[str, tuple[str, ...]]]:
        """The statements and parameters that apply ``change``."""
        sql = self._sql.get((change.table, change.field))
        if sql is None:
            raise ValueError(f"no value {change.field!r} in table {change.table!r} to rewrite")
        keyed = _FIELDS[change.table][1] is not None
        params = (change.new, change.owner, *((change.key,) if keyed else ()), change.old)
        out = [(sql, params)]
        if change.table == "steps":
            out.append(
                (self.payload, (change.new, change.owner, change.key, change.field, change.old))
            )
        return out
