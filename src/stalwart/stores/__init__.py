"""Stores: where runs, steps and signals are kept (see :mod:`stalwart.stores.base`).

A store is picked by URL: None or "memory" for none, ``sqlite:///path``,
``postgresql://...``; the drivers load only when their URL is used.
"""

from __future__ import annotations

from ..core.errors import StoreError
from .base import SignalRecord, Store

__all__ = ["SignalRecord", "Store", "open_store"]


def open_store(url: str | Store | None) -> Store | None:
    """The store for a URL: None or "memory" for none, sqlite:///…, postgresql://…."""
    if url is None or isinstance(url, Store):
        return url
    if url in ("memory", "memory://", ":memory:"):
        return None
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
