"""The memory store's versions: the SQL stores' rules over dicts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from ..core.ledger import TERMINAL, RunRecord
from .versions import FORGET_AFTER, VersionRecord, WorkerRecord, with_cleared

__all__ = ["MemoryVersions"]


class MemoryVersions:
    """Workers by owner and versions in the order first seen."""

    _runs: dict[str, RunRecord]
    _workers: dict[str, WorkerRecord]
    _versions: dict[str, VersionRecord]

    async def beat_worker(self, worker: WorkerRecord) -> list[VersionRecord]:
        known = self._workers.get(worker.owner)
        started = worker.started_at if known is None else known.started_at
        self._workers[worker.owner] = replace(worker, started_at=started)
        if worker.version not in self._versions:
            self._versions[worker.version] = VersionRecord(
                worker.version, False, None, worker.beat_at
            )
        silent = worker.beat_at - FORGET_AFTER
        for owner in [o for o, w in self._workers.items() if w.beat_at < silent]:
            del self._workers[owner]
        return list(self._versions.values())

    async def forget_worker(self, owner: str) -> None:
        known = self._workers.get(owner)
        if known is not None:
            self._workers[owner] = replace(known, lease=0.0)

    async def list_workers(self) -> list[WorkerRecord]:
        return sorted(self._workers.values(), key=lambda w: (w.version, w.owner))

    async def list_versions(self) -> list[VersionRecord]:
        return list(self._versions.values())

    async def set_latest(self, version: str) -> None:
        for name, v in list(self._versions.items()):
            if v.latest and name != version:
                self._versions[name] = replace(v, latest=False)
        known = self._versions.get(version)
        self._versions[version] = (
            VersionRecord(version, True, None, time.time())
            if known is None
            else replace(known, latest=True, retired_at=None)
        )

    async def retire_version(self, version: str) -> None:
        now = time.time()
        known = self._versions.get(version)
        self._versions[version] = (
            VersionRecord(version, False, now, now)
            if known is None
            else replace(known, latest=False, retired_at=known.retired_at or now)
        )

    async def clear_run(
        self, run_id: str, versions: Sequence[str], fence: int | None = None
    ) -> RunRecord | None:
        rec = self._runs.get(run_id)
        if rec is None:
            return None
        if fence is not None and rec.fence != fence:
            with_cleared(None, versions)  # the same error for a bad version
            return None
        rec.cleared = with_cleared(rec.cleared, versions)
        return replace(rec)

    async def pin_run(
        self, run_id: str, code_version: str, fence: int | None = None
    ) -> RunRecord | None:
        rec = self._runs.get(run_id)
        if rec is None or rec.status in TERMINAL or (fence is not None and rec.fence != fence):
            return None
        rec.code_version = code_version
        rec.cleared = None
        if fence is None:
            rec.updated_at = time.time()
        return replace(rec)
