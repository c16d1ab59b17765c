"""Where datasets are kept: the run store's memory rows, under the reserved
namespace ``stalwart.evals`` (no table of their own).

- ``("stalwart.evals", "datasets")``, key the dataset's name: the names
  :meth:`DatasetStore.list` walks;
- ``("stalwart.evals", "dataset", NAME)``, key the version (``000003``):
  what that version holds (how many cases, a digest of them, when) and
  whether it is saved yet;
- ``("stalwart.evals", "dataset", NAME, VERSION)``, key the case's place
  (``000041``): one row a case, so a big dataset is many small rows.

A save first claims its version number: it inserts that version's row,
marked unsaved, where no row is (:meth:`~stalwart.stores.base.Store.memory_insert`:
of two processes saving one name at once, exactly one gets a number, and
the other takes the next). Only the claimant writes that version's cases,
then marks its row saved; readers see saved versions only. So concurrent
saves make distinct versions, never one lost or mixed; a save cut short by
a crash leaves its number unused. A saved version is never written again;
saving the same cases as the latest version returns it.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from ..core.memory import MemoryRecord, namespace_text
from ..stores.base import Store
from .dataset import Dataset, DatasetCase, check_name

__all__ = ["RESERVED", "DatasetInfo", "DatasetStore"]

#: The memory namespace datasets and experiment scores are kept under.
RESERVED = "stalwart.evals"
_INDEX = namespace_text((RESERVED, "datasets"))
_LIST_MOST = 100_000
#: Version numbers a save tries past the latest saved one before it gives up.
_CLAIM_TRIES = 1000


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset's latest version: its name, version, how many cases, its
    description and when it was saved (seconds since the epoch)."""

    name: str
    version: int
    cases: int
    description: str
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "cases": self.cases,
            "description": self.description,
            "created_at": self.created_at,
        }


class DatasetStore:
    """Datasets in a run store (``DatasetStore(runner.store)``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def save(self, dataset: Dataset) -> Dataset:
        """Save ``dataset``'s cases as the next version of its name and return
        it so (``version`` set); the latest version itself if it holds the
        same cases and description. Safe against other processes saving
        the same name at once: each save gets a version of its own."""
        name = check_name(dataset.name)
        digest = _digest(dataset)
        latest = await self._version_row(name, None)
        if latest is not None and latest["digest"] == digest:
            return await self.load(name, int(latest["version"]))
        version = 1 if latest is None else int(latest["version"]) + 1
        versions_ns = namespace_text((RESERVED, "dataset", name))
        now = time.time()
        row = {
            "name": name,
            "version": version,
            "cases": len(dataset.cases),
            "description": dataset.description,
            "created_at": now,
            "digest": digest,
            "saved": False,
        }
        for _ in range(_CLAIM_TRIES):
            row["version"] = version
            if await self._insert(versions_ns, f"{version:06d}", row, now):
                break
            # Another save holds this number: a saved twin of ours is ours.
            taken = await self._version_row(name, version, saved_only=False)
            if taken is not None and taken.get("saved", True) and taken["digest"] == digest:
                return await self.load(name, version)
            version += 1
        else:
            raise RuntimeError(
                f"dataset {name!r}: no free version number in {_CLAIM_TRIES} tries after "
                f"version {version - _CLAIM_TRIES}"
            )
        cases_ns = namespace_text((RESERVED, "dataset", name, f"{version:06d}"))
        for i, case in enumerate(dataset.cases):
            await self._put(cases_ns, f"{i:06d}", case.to_json(), now)
        row["saved"] = True
        await self._put(versions_ns, f"{version:06d}", row, now)
        await self._put(_INDEX, name, {"name": name}, now)
        return Dataset(name, list(dataset.cases), version, dataset.description, now)

    async def load(self, name: str, version: int | None = None) -> Dataset:
        """Version ``version`` of dataset ``name`` (None: the latest); a
        KeyError naming what is missing."""
        row = await self._version_row(check_name(name), version)
        if row is None:
            which = "any version" if version is None else f"version {version}"
            raise KeyError(f"dataset {name!r} has no {which} in this store")
        found = int(row["version"])
        cases_ns = namespace_text((RESERVED, "dataset", name, f"{found:06d}"))
        records = await self.store.memory_list(cases_ns, max(1, int(row["cases"])))
        records.sort(key=lambda r: r.key)
        if len(records) != int(row["cases"]):
            raise KeyError(
                f"dataset {name!r} version {found}: {len(records)} of {row['cases']} cases "
                "are in the store"
            )
        cases = [
            DatasetCase.from_json(json.loads(r.value), f"dataset {name!r} v{found} case {r.key}")
            for r in records
        ]
        return Dataset(name, cases, found, str(row["description"]), float(row["created_at"]))

    async def list(self) -> list[DatasetInfo]:
        """Every dataset's latest version, by name."""
        names = sorted(r.key for r in await self.store.memory_list(_INDEX, _LIST_MOST))
        found = [await self._version_row(n, None) for n in names]
        return [_info(row) for row in found if row is not None]

    async def versions(self, name: str) -> builtins.list[DatasetInfo]:
        """Every saved version of dataset ``name``, oldest first."""
        return [_info(row) for row in await self._saved_rows(check_name(name))]

    async def _saved_rows(self, name: str) -> builtins.list[dict[str, Any]]:
        """The rows of ``name``'s saved versions, oldest first (a row written
        before versions were claimed has no ``saved``: it is saved)."""
        ns = namespace_text((RESERVED, "dataset", name))
        rows = [json.loads(r.value) for r in await self.store.memory_list(ns, _LIST_MOST)]
        return sorted((r for r in rows if r.get("saved", True)), key=lambda r: int(r["version"]))

    async def _version_row(
        self, name: str, version: int | None, *, saved_only: bool = True
    ) -> dict[str, Any] | None:
        """Version ``version``'s row (None: the latest saved one)."""
        if version is None:
            saved = await self._saved_rows(name)
            return saved[-1] if saved else None
        rec = await self.store.memory_get(
            namespace_text((RESERVED, "dataset", name)), f"{version:06d}"
        )
        if rec is None:
            return None
        row: dict[str, Any] = json.loads(rec.value)
        return row if row.get("saved", True) or not saved_only else None

    async def _insert(self, namespace: str, key: str, value: Any, now: float) -> bool:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        return await self.store.memory_insert(
            MemoryRecord(namespace, key, text, "", None, now, now)
        )

    async def _put(self, namespace: str, key: str, value: Any, now: float) -> None:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        await self.store.memory_put(MemoryRecord(namespace, key, text, "", None, now, now))


def _info(row: dict[str, Any]) -> DatasetInfo:
    return DatasetInfo(
        str(row["name"]),
        int(row["version"]),
        int(row["cases"]),
        str(row["description"]),
        float(row["created_at"]),
    )


def _digest(dataset: Dataset) -> str:
    body = json.dumps([dataset.description, [c.to_json() for c in dataset.cases]], sort_keys=True)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()
