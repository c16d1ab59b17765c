"""Each subject's own data keys, wrapped by a master key, kept in the store.

A subject (a user, a tenant: a run's ``subject`` tag) gets a random 256-bit
key the first time one of its values is sealed. The key is kept wrapped
(sealed by the newest master key) as a row of the store's memory, in the
namespace ``["stalwart.subjects", subject]`` under a random key id, so
that two processes creating a subject's key at once each add their own row
and neither overwrites the other: a subject may have several keys, and its
values name the one that sealed them. Erasing a subject deletes its rows:
every value sealed under them, in the database, in its backups taken since
and in every export, can no longer be opened by anyone.
"""

from __future__ import annotations

import json
import secrets
import time

from ...core.memory import MemoryRecord, namespace_text
from ..base import Store
from .cipher import Cipher, DataKey, place, sealed_label, subject_label

__all__ = ["SUBJECTS_NAMESPACE", "SubjectKeys", "subject_namespace"]

SUBJECTS_NAMESPACE = "stalwart.subjects"
_MAX_KEYS = 1000
#: How long a process trusts the keys it holds of a subject before it looks
#: again whether another process erased it (seconds).
RECHECK = 1.0


def subject_namespace(subject: str) -> str:
    """The memory namespace (as a store keys it) of ``subject``'s keys."""
    return namespace_text((SUBJECTS_NAMESPACE, subject))


def _wrap_place(subject: str, kid: str) -> str:
    return place("subject-key", subject, kid, "key")


class SubjectKeys:
    """The subjects' keys of one store, cached once unwrapped."""

    def __init__(self, store: Store, cipher: Cipher) -> None:
        self.store = store
        self.cipher = cipher
        self._keys: dict[tuple[str, str], DataKey] = {}
        self._sealing: dict[str, DataKey] = {}
        self._checked: dict[str, float] = {}

    async def _fresh(self, subject: str) -> None:
        """Forget the keys of ``subject`` another process deleted (erased),
        looking at most once every :data:`RECHECK` seconds."""
        now = time.monotonic()
        if now - self._checked.get(subject, -RECHECK) < RECHECK:
            return
        rows = await self.store.memory_list(subject_namespace(subject), _MAX_KEYS)
        self._checked[subject] = now
        kept = {r.key for r in rows}
        for cached in [k for k in self._keys if k[0] == subject and k[1] not in kept]:
            del self._keys[cached]
        sealing = self._sealing.get(subject)
        if sealing is not None and sealing.label.rpartition(".")[2] not in kept:
            del self._sealing[subject]

    async def sealing_key(self, subject: str) -> DataKey:
        """The key new values of ``subject`` are sealed under (made if it has none)."""
        await self._fresh(subject)
        key = self._sealing.get(subject)
        if key is not None:
            return key
        rows = await self.store.memory_list(subject_namespace(subject), _MAX_KEYS)
        for row in sorted(rows, key=lambda r: (r.created_at, r.key)):
            key = await self.key(subject, row.key, row)
            if key is not None:
                break
        else:
            key = await self._create(subject)
        self._sealing[subject] = key
        return key

    async def _create(self, subject: str) -> DataKey:
        kid = secrets.token_hex(8)
        raw = Cipher.new_data_key()
        master = self.cipher.newest
        wrapped = master.wrap(raw, _wrap_place(subject, kid))
        now = time.time()
        value = json.dumps({"wrapped": wrapped}, separators=(",", ":"))
        await self.store.memory_put(
            MemoryRecord(subject_namespace(subject), kid, value, "", None, now, now)
        )
        key = DataKey(subject_label(subject, kid), raw)
        self._keys[(subject, kid)] = key
        return key

    async def key(self, subject: str, kid: str, row: MemoryRecord | None = None) -> DataKey | None:
        """``subject``'s key ``kid``; None when it is gone (erased) or no
        master key held opens it."""
        if row is None:
            await self._fresh(subject)
        found = self._keys.get((subject, kid))
        if found is not None:
            return found
        if row is None:
            row = await self.store.memory_get(subject_namespace(subject), kid)
            if row is None:
                return None
        raw = self._unwrap(subject, kid, row)
        if raw is None:
            return None
        found = self._keys[(subject, kid)] = DataKey(subject_label(subject, kid), raw)
        return found

    def _unwrap(self, subject: str, kid: str, row: MemoryRecord) -> bytes | None:
        try:
            wrapped = json.loads(row.value)["wrapped"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(wrapped, str):
            return None
        master = self.cipher.master(sealed_label(wrapped) or "")
        return None if master is None else master.unwrap(wrapped, _wrap_place(subject, kid))

    async def erase(self, subject: str) -> int:
        """Delete every key of ``subject``; how many there were."""
        self._sealing.pop(subject, None)
        self._checked.pop(subject, None)
        for cached in [k for k in self._keys if k[0] == subject]:
            del self._keys[cached]
        namespace = subject_namespace(subject)
        gone = 0
        while rows := await self.store.memory_list(namespace, _MAX_KEYS):
            for row in rows:
                gone += await self.store.memory_delete(namespace, row.key)
        return gone

    async def rewrap(self, subject: str) -> int:
        """Wrap ``subject``'s keys under the newest master key; how many changed."""
        changed = 0
        namespace = subject_namespace(subject)
        master = self.cipher.newest
        for row in await self.store.memory_list(namespace, _MAX_KEYS):
            try:
                wrapped = json.loads(row.value)["wrapped"]
            except (ValueError, KeyError, TypeError):
                continue
            if sealed_label(wrapped) == master.label:
                continue
            raw = self._unwrap(subject, row.key, row)
            if raw is None:
                continue
            value = json.dumps(
                {"wrapped": master.wrap(raw, _wrap_place(subject, row.key))},
                separators=(",", ":"),
            )
            await self.store.memory_put(
                MemoryRecord(namespace, row.key, value, "", None, row.created_at, row.updated_at)
            )
            changed += 1
        return changed
