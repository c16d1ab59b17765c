"""Rows written behind the engine's back, and a module whose import is the
bug: what the trust tests (S13) are built from."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from tests.conftest import PG_URL


def write_row(store_url: str, sql: str, *params: Any) -> None:
    """Write a row as an attacker (or a careless admin) would: straight SQL,
    ``?`` placeholders, on either store."""
    if store_url.startswith("sqlite"):
        db = sqlite3.connect(store_url.removeprefix("sqlite:///").split("?")[0])
        with db:
            db.execute(sql, params)
        db.close()
        return
    import psycopg

    schema = parse_qs(urlsplit(store_url).query)["schema"][0]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute(sql.replace("?", "%s"), params)


class Evil(NamedTuple):
    """A module on sys.path that leaves ``marker`` when imported; rows name it."""

    name: str
    marker: Path

    def untouched(self) -> None:
        assert not self.marker.exists(), "a name read from a record was imported"
        assert self.name not in sys.modules


def evil_module(folder: Path) -> Evil:
    """Write the module into ``folder`` (the caller puts it on sys.path)."""
    marker = folder / "imported"
    name = f"evil_{folder.name.replace('-', '_')}"
    (folder / f"{name}.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\n"
        "import dataclasses, enum\n"
        "class Boom(Exception):\n    pass\n"
        "class E(enum.Enum):\n    A = 'a'\n"
        "@dataclasses.dataclass\nclass D:\n    x: int = 0\n"
        "async def pol():\n    return 'hijacked'\n"
    )
    return Evil(name, marker)
