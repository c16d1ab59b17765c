"""Values encrypted at rest, erasable per subject (docs/encryption.md).

``EncryptedStore(store, keys)`` wraps a store so that every value it records
is sealed with AES-256-GCM (the ``cryptography`` package: the
``encryption`` extra) under the application's master keys
(:class:`KeyProvider`: :class:`EnvKeys`, :class:`FileKeys`, or one's own
for a key management service), or under a subject's own key for runs
tagged ``subject``, which :func:`erase_subject` deletes.
:func:`reencrypt` moves every value to the newest key.
"""

from __future__ import annotations

from .keys import (
    KEYS_FILE_VARIABLE,
    KEYS_VARIABLE,
    EnvKeys,
    FileKeys,
    KeyProvider,
    StaticKeys,
    keys_from_environment,
    new_key_line,
)
from .reencrypt import Progress, reencrypt
from .store import SUBJECT_TAG, EncryptedStore

__all__ = [
    "KEYS_FILE_VARIABLE",
    "KEYS_VARIABLE",
    "SUBJECT_TAG",
    "EncryptedStore",
    "EnvKeys",
    "FileKeys",
    "KeyProvider",
    "Progress",
    "StaticKeys",
    "erase_subject",
    "keys_from_environment",
    "new_key_line",
    "reencrypt",
]


async def erase_subject(store: EncryptedStore, subject: str) -> int:
    """Erase ``subject`` everywhere at once: delete its keys (how many went
    is returned). Its values, in the database, in backups taken from now on
    and in every export, can no longer be opened by anyone; readers show
    "erased" in their place, and a run that needs one fails naming it."""
    return await store.erase_subject(subject)
