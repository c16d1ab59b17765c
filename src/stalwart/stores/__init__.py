"""Stores: where runs, steps and signals are kept (see :mod:`stalwart.stores.base`).

A store is picked by URL: None or "memory" for the in-process
:class:`~stalwart.stores.memory.MemoryStore`, ``sqlite:///path``,
``postgresql://...``; the drivers load only when their URL is used.
When the environment names encryption keys (``STALWART_KEYS`` or
``STALWART_KEYS_FILE``), a store opened by URL is encrypted at rest
(:class:`stalwart.stores.encryption.EncryptedStore`).
"""

from __future__ import annotations

import os

from ..core.errors import StoreError
from .base import SignalRecord, Store
from .memory import MemoryStore

__all__ = ["MemoryStore", "SignalRecord", "Store", "open_store"]


def open_store(url: str | Store | None, *, keys: bool = True) -> Store:
    """The store for a URL: None or "memory" (in this process), sqlite:///…, postgresql://….

    A durable store is encrypted when the environment names keys, unless
    ``keys`` is False (values read and written as stored: an export's bytes).
    """
    if isinstance(url, Store):
        return url
    if url is None or url in ("memory", "memory://", ":memory:"):
        return MemoryStore()
    store = _by_url(url)
    if keys and (os.environ.get("STALWART_KEYS") or os.environ.get("STALWART_KEYS_FILE")):
        from .encryption import EncryptedStore, keys_from_environment

        provider = keys_from_environment()
        if provider is not None:
            return EncryptedStore(store, provider)
    return store


def _by_url(url: str) -> Store:
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
