"""Stores: where runs, steps and signals are kept (see :mod:`stalwart.stores.base`).

A store is picked by URL: None or "memory" for the in-process
:class:`~stalwart.stores.memory.MemoryStore`, ``sqlite:///path``,
``postgresql://...``; the drivers load only when their URL is used.
"""

from __future__ import annotations

from ..core.errors import StoreError
from .base import SignalRecord, Store
from .memory import MemoryStore

__all__ = ["MemoryStore", "SignalRecord", "Store", "open_store"]


def open_store(url: str | Store | None) -> Store:
    """The store for a URL: None or "memory" (in this process), sqlite:///…, postgresql://…."""
    if isinstance(url, Store):
        return url
    if url is None or url in ("memory", "memory://", ":memory:"):
        return MemoryStore()
    if url.startswith("sqlite://"):
        from .sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from .postgres import PostgresStore  # type: ignore[import-not-found, unused-ignore]
        except ImportError as exc:
            raise StoreError(
                f"the PostgreSQL store needs its extra: pip install 'stalwart[postgres]' ({exc})"
            ) from exc
        store: Store = PostgresStore.from_url(url)
        return store
    raise StoreError(
        f"unknown store URL {url!r}: use 'memory', 'sqlite:///path/to/file.db' "
        "or 'postgresql://user@host/db'"
    )
