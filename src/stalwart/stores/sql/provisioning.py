"""Stores whose tables the operator creates: the ``migrate`` option and its refusal.

By default a SQL store creates its tables on first open and migrates them
when the code's schema version is newer. Some operators do not let an
application run DDL: with ``migrate=false`` in the store's URL the store only
checks the version it finds, and refuses to open at any other version,
naming the command that prints the SQL to apply (``stalwart store ddl``).
"""

from __future__ import annotations

from ...core.errors import StoreError

__all__ = ["DDL_COMMAND", "migrate_option", "not_provisioned"]

#: The command that prints the SQL a store needs, for ``--store URL``.
DDL_COMMAND = "stalwart store ddl --store"


def migrate_option(value: str) -> bool:
    """The ``migrate`` option of a store URL: ``true`` or ``false``."""
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise StoreError(f"migrate must be 'true' or 'false', not {value!r}")


def not_provisioned(store: str, found: int, needed: int, url: str) -> StoreError:
    """The error of a store opened with ``migrate=false`` whose tables are
    not at the code's schema version ``needed``; ``found`` is 0 when it has none."""
    has = "has no Stalwart tables (version 0)" if found == 0 else f"has schema version {found}"
    return StoreError(
        f"{store} {has}, this Stalwart needs version {needed}, and migrate=false "
        f"forbids creating or migrating tables: apply the SQL that "
        f"`{DDL_COMMAND} {url}` prints, then open it again"
    )
