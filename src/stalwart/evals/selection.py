"""Which recorded runs an experiment re-runs: ids, or a selection by policy,
status and time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.ledger import RunRecord
from ..runner.runner import Runner

__all__ = ["Selection", "select_runs"]


@dataclass(frozen=True)
class Selection:
    """Recorded runs: ``ids`` by name, else the newest ``limit`` root runs of
    ``policy`` with ``status`` created between ``since`` and ``until``
    (seconds since the epoch). Forks of an experiment are never selected."""

    ids: Sequence[str] = ()
    policy: str | None = None
    status: str | None = "succeeded"
    since: float | None = None
    until: float | None = None
    limit: int = 100


async def select_runs(runner: Runner, selection: Selection, *, skip: str = "") -> list[RunRecord]:
    """The runs ``selection`` names, oldest first; ``skip``: a suffix of run
    ids left out (an experiment's own forks)."""
    if selection.ids:
        return [await runner.get_run(i) for i in selection.ids]
    found = await runner.list_runs(
        selection.status,
        selection.limit,
        policy=selection.policy,
        created_after=selection.since,
        created_before=selection.until,
    )
    kept = [r for r in found if r.parent_id is None and not (skip and r.id.endswith(skip))]
    return sorted(kept, key=lambda r: (r.created_at, r.id))
