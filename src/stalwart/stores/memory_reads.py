"""The memory store's read queries: listings, counts, runs waiting for a
human, where a run's steps sit and the ones asked for.

What an inspector asks (``stalwart ui``, ``stalwart runs list --json``) and
what an event stream polls, answered from the memory store's dicts with the
SQL stores' order and filters (see :class:`~stalwart.stores.base.Store.list_runs`
and :meth:`~stalwart.stores.base.Store.step_positions`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import replace

from ..core.ledger import RunRecord, StoredStep
from ..core.mail import GENERATION_KEY
from ..core.tags import decode_tags
from .base import children_prefix
from .search import search_words, value_words

__all__ = ["MemoryReads", "has_tags", "has_words"]


class MemoryReads:
    """Read queries over ``_runs`` (run id -> record) and ``_steps`` (run id
    -> key -> record, as stored), mixed into the memory store."""

    _runs: dict[str, RunRecord]
    _steps: dict[str, dict[str, StoredStep]]

    async def step_positions(
        self, run_id: str, known: int = -1, since: float = -math.inf
    ) -> tuple[int, dict[str, float]]:
        steps = self._steps.get(run_id, {})
        generation = steps.get(GENERATION_KEY)
        mark = {} if generation is None else {GENERATION_KEY: generation.finished_at}
        if len(steps) == known:  # nothing added: no step looked at but the generation's
            return known, mark
        found = {k: s.finished_at for k, s in steps.items() if s.finished_at >= since}
        return len(steps), mark | found

    async def stored_steps_by_key(
        self, run_id: str, keys: Collection[str]
    ) -> dict[str, StoredStep]:
        steps = self._steps.get(run_id, {})
        return {k: replace(steps[k]) for k in keys if k in steps}

    async def list_runs(
        self,
        status: str | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        queue: str | None = None,
        policy: str | None = None,
        id_contains: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        before: tuple[float, str] | None = None,
        tags: Mapping[str, str] | None = None,
        text: str | None = None,
    ) -> list[RunRecord]:
        words = None if text is None else search_words(text)

        def wanted(r: RunRecord) -> bool:
            return (
                (status is None or r.status == status)
                and (queue is None or r.queue == queue)
                and (policy is None or r.policy == policy)
                and (id_contains is None or id_contains in r.id)
                and (created_after is None or r.created_at >= created_after)
                and (created_before is None or r.created_at < created_before)
                and (before is None or (r.created_at, r.id) < before)
                and (not tags or has_tags(r, tags))
                and (words is None or has_words(r, words))
            )

        found = sorted(
            (r for r in self._runs.values() if wanted(r)),
            key=lambda r: (r.created_at, r.id),
            reverse=True,
        )
        return [replace(r) for r in found[offset : offset + limit]]

    async def count_runs(
        self,
        *,
        queue: str | None = None,
        policy: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for r in self._runs.values():
            if (
                (queue is None or r.queue == queue)
                and (policy is None or r.policy == policy)
                and (not tags or has_tags(r, tags))
            ):
                by_queue = counts.setdefault(r.status, {})
                by_queue[r.queue] = by_queue.get(r.queue, 0) + 1
        return counts

    async def waiting_for_signals(self, limit: int = 100) -> list[RunRecord]:
        waiting = sorted(
            (
                r
                for r in self._runs.values()
                if r.status == "suspended"
                and r.waiting_for is not None
                and children_prefix(r.waiting_for) is None
            ),
            key=lambda r: (r.updated_at, r.id),
        )
        return [replace(r) for r in waiting[:limit]]


def has_tags(run: RunRecord, tags: Mapping[str, str]) -> bool:
    """Whether ``run`` has every one of ``tags``."""
    have = decode_tags(run.tags)
    return all(have.get(k) == v for k, v in tags.items())


def has_words(run: RunRecord, words: Collection[str]) -> bool:
    """Whether ``run``'s inputs, result and error hold every one of ``words``
    (:mod:`.search`), as the SQL stores' text indexes answer."""
    have = value_words(run.inputs) | value_words(run.result) | value_words(run.error)
    return all(w in have for w in words)
