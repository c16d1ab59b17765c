"""Which recorded runs an experiment re-runs or a dataset draws from: ids, or
a selection by policy, status, time, tags and a predicate."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import CorruptedRecord
from ..core.ledger import RunRecord
from ..runner.runner import Runner
from ..timetravel import lineage
from .scorers import Outcome

__all__ = ["Selection", "recorded_inputs", "select_runs"]

#: A predicate over a run's recorded inputs (``{"args": [...], "kwargs":
#: {...}}`` as plain JSON) and its :class:`Outcome`: keep the run if true.
Where = Callable[[dict[str, Any], Outcome], bool]


@dataclass(frozen=True)
class Selection:
    """Recorded runs: ``ids`` by name, else the newest ``limit`` root runs of
    ``policy`` with ``status`` created between ``since`` and ``until``
    (seconds since the epoch) that carry every one of ``tags`` and for which
    ``where(inputs, outcome)`` is true. Forks of an experiment are never
    selected."""

    ids: Sequence[str] = ()
    policy: str | None = None
    status: str | None = "succeeded"
    since: float | None = None
    until: float | None = None
    limit: int = 100
    tags: Mapping[str, str] = field(default_factory=dict)
    where: Where | None = None


async def select_runs(runner: Runner, selection: Selection) -> list[RunRecord]:
    """The runs ``selection`` names, oldest first. A selection by policy
    leaves forks out (runs with a lineage, :func:`~stalwart.timetravel.lineage`):
    an experiment's own forks are not history. ``where`` is asked about the
    runs the other filters kept, newest first, until ``limit`` are found."""
    if selection.ids:
        return [await runner.get_run(i) for i in selection.ids]
    kept: list[RunRecord] = []
    page = max(1, min(selection.limit, 500))
    before: tuple[float, str] | None = None
    while len(kept) < selection.limit:
        found = await runner.list_runs(
            selection.status,
            page,
            policy=selection.policy,
            created_after=selection.since,
            created_before=selection.until,
            tags=selection.tags or None,
            before=before,
        )
        for r in found:
            if r.parent_id is not None or len(kept) >= selection.limit:
                continue
            steps = await runner.steps(r.id)
            if lineage(steps) is not None:
                continue
            where = selection.where
            if where is not None and not where(recorded_inputs(r), Outcome.of(r, steps)):
                continue
            kept.append(r)
        if len(found) < page:
            break
        before = (found[-1].created_at, found[-1].id)
    return sorted(kept, key=lambda r: (r.created_at, r.id))


def recorded_inputs(run: RunRecord) -> dict[str, Any]:
    """A run's recorded inputs as plain JSON (``{"args": [...], "kwargs":
    {...}}``, messages left as their ``{"$t": ...}`` trees: nothing is
    decoded, so no type of the program is needed); a corrupted record is a
    :class:`~stalwart.core.errors.CorruptedRecord` naming the run."""
    try:
        data = json.loads(run.inputs)
    except ValueError:
        data = None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("args"), list)
        or not isinstance(data.get("kwargs"), dict)
    ):
        raise CorruptedRecord(
            f"inputs of run {run.id!r}: not a record of arguments "
            '({"args": [...], "kwargs": {...}})'
        )
    return data
