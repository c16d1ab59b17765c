"""``stalwart store ddl``: the SQL that provisions a store, for an operator to apply.

For operators who do not let applications run DDL: the command prints the
SQL that creates the store's tables at this Stalwart's schema version or, for
a store at an older version, the SQL that migrates it (every later
migration, and the ``stalwart_schema`` rows they record). It only reads the
store; the application then opens it with ``migrate=false`` in its URL.
"""

from __future__ import annotations

import typer

from .command import DEFAULT_STORE, StoreOption, execute, open_store

__all__ = ["store_ddl"]


def store_ddl(store: StoreOption = DEFAULT_STORE) -> None:
    """Print the SQL that creates or migrates the store's tables; change nothing.

    A missing SQLite file or a PostgreSQL schema without tables gets every
    table; a store at an older schema version gets the migrations after it;
    a store at this version gets a comment saying there is nothing to apply.
    Apply it with sqlite3 or psql, then open the store with ?migrate=false.
    """

    async def go() -> str:
        return await open_store(store, must_exist=False).ddl()

    typer.echo(execute(go), nl=False)
