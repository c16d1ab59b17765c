"""Two runs side by side: their inputs, their steps aligned by step key
(S1: the same call made at the same place has the same key in both), their
outcomes; each row that differs is marked, and the first one is linked
from the top of the page.

Any two runs compare (two versions of an agent on one input); a fork's
page links to the comparison with the run it was forked from
(:func:`origin_of`, the lineage :func:`stalwart.timetravel.fork` records).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.ledger import RunRecord, StepRecord
from ..stores import Store
from ..timetravel import LINEAGE_KEY, lineage, sort_keys
from ..timetravel.fork import LINEAGE_NAME
from .values import Shown, clip, error_summary, pretty, shown, value_link

__all__ = ["STEP_LIMIT", "Comparison", "Row", "compare", "origin_of"]

#: The steps of each run a comparison reads: the first ones in finish order.
STEP_LIMIT = 500


@dataclass(frozen=True)
class Side:
    """One run's value in a row (None: the run has no such step)."""

    name: str
    value: Shown | None
    failed: bool = False
    args: str = ""  # a step's arguments, on one line


@dataclass(frozen=True)
class Row:
    """One line of the comparison: a value of each run, and whether they
    differ. ``anchor`` is the row's id in the page."""

    label: str
    key: str
    left: Side
    right: Side
    differs: bool
    anchor: str


@dataclass(frozen=True)
class Comparison:
    """The rows of two runs side by side, and the first that differs."""

    left: RunRecord
    right: RunRecord
    rows: list[Row]
    first: Row | None
    cut: bool  # a run had more steps than were read


async def origin_of(store: Store, run: RunRecord) -> str | None:
    """The id of the run ``run`` was forked from, if it is a fork."""
    step = await store.load_step(run.id, LINEAGE_KEY)
    if step is None:
        return None
    found = lineage({step.key: step})
    return None if found is None else found.run_id


def _outcome(run: RunRecord) -> Side:
    if run.error is not None:
        return Side(run.status, shown(run.error, value_link(run.id, "error")), failed=True)
    if run.result is not None:
        return Side(run.status, shown(run.result, value_link(run.id, "result")))
    return Side(run.status, None)


def _step_side(run_id: str, step: StepRecord | None) -> Side:
    if step is None:
        return Side("", None)
    href = value_link(run_id, "output", step.key)
    args = clip(step.args or "")
    if step.error is not None:
        return Side(step.name, shown(step.error, href), failed=True, args=args)
    return Side(step.name, shown(step.output, href), args=args)


def _same_step(a: StepRecord | None, b: StepRecord | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.name, pretty(a.args), pretty(a.output), pretty(a.error)) == (
        b.name,
        pretty(b.args),
        pretty(b.output),
        pretty(b.error),
    )


async def compare(store: Store, left: RunRecord, right: RunRecord) -> Comparison:
    """``left`` and ``right`` side by side, from at most :data:`STEP_LIMIT`
    steps of each."""
    first_steps = (float("-inf"), "")
    pages = [await store.step_page(r.id, STEP_LIMIT, after=first_steps) for r in (left, right)]
    steps = [
        {s.key: s for s in page.steps if s.name != LINEAGE_NAME or s.key != LINEAGE_KEY}
        for page in pages
    ]
    rows = [
        Row(
            "inputs",
            "",
            Side("", shown(left.inputs, value_link(left.id, "inputs"))),
            Side("", shown(right.inputs, value_link(right.id, "inputs"))),
            pretty(left.inputs) != pretty(right.inputs),
            "inputs",
        )
    ]
    for n, key in enumerate(sort_keys(list(steps[0].keys() | steps[1].keys()))):
        a, b = steps[0].get(key), steps[1].get(key)
        label = a.name if a is not None else b.name if b is not None else key
        rows.append(
            Row(
                label,
                key,
                _step_side(left.id, a),
                _step_side(right.id, b),
                not _same_step(a, b),
                f"step-{n}",
            )
        )
    l_out, r_out = _outcome(left), _outcome(right)
    rows.append(
        Row(
            "outcome",
            "",
            l_out,
            r_out,
            (left.status, pretty(left.result), error_summary(left.error))
            != (right.status, pretty(right.result), error_summary(right.error)),
            "outcome",
        )
    )
    first = next((r for r in rows if r.differs), None)
    cut = any(p.count > len(p.steps) for p in pages)
    return Comparison(left, right, rows, first, cut)
