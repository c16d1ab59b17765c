"""Which recorded runs an experiment re-runs: ids, or a selection by policy,
status and time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.ledger import RunRecord
from ..runner.runner import Runner
from ..timetravel import lineage

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


async def select_runs(runner: Runner, selection: Selection) -> list[RunRecord]:
    """The runs ``selection`` names, oldest first. A selection by policy
    leaves forks out (runs with a lineage, :func:`~stalwart.timetravel.lineage`):
    an experiment's own forks are not history."""
    if selection.ids:
        return [await runner.get_run(i) for i in selection.ids]
    found = await runner.list_runs(
        selection.status,
        selection.limit,
        policy=selection.policy,
        created_after=selection.since,
        created_before=selection.until,
    )
    kept = [r for r in found if r.parent_id is None and lineage(await runner.steps(r.id)) is None]
    return sorted(kept, key=lambda r: (r.created_at, r.id))
