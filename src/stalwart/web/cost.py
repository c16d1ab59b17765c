"""What a run cost and where its time went, as its page charts them.

Tokens and cost by model come from the usage model replies recorded
(:func:`.conversation.usage_by_model`). A reply's cost is the one its
provider recorded when there is one; else it is priced from the table the
inspector was given (``stalwart ui --prices FILE``, the table
``stalwart worker --prices`` reads: :func:`stalwart.llm.read_prices`); else
it is unknown, and said so, never guessed.

Time is the timeline's account (:class:`.timeline.Spent`): model calls,
tool calls, sleeps and waits on the clock, and the rest of the run's span
(the policy's own code, other steps, the engine), drawn as one stacked bar.
Numbers only reach the drawing; every name is text the template escapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..llm import Price, Usage
from .conversation import ModelUsage
from .timeline import Spent
from .values import fmt_duration

__all__ = ["CostTable", "ModelCost", "Segment", "cost_table", "time_split"]

#: The width of the charts' bars, in the drawing's own units.
WIDTH = 600.0


@dataclass(frozen=True)
class ModelCost:
    """One model's row: its replies, tokens and cost, and how the cost is
    known (``recorded`` by the provider, from the ``price table``, or ``""``:
    unknown); ``width`` is its tokens' bar, in :data:`WIDTH` units."""

    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    source: str
    input_width: float
    output_width: float

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class CostTable:
    """Every model's row, and the totals (the cost None when any row's is unknown)."""

    rows: list[ModelCost]
    input_tokens: int
    output_tokens: int
    cost: float | None
    priced: bool  # whether a price table was given

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def cost_table(usage: Sequence[ModelUsage], prices: Mapping[str, Price] | None) -> CostTable:
    """The rows of ``usage`` with their costs: recorded, else priced by
    ``prices`` (a model missing from it stays unknown)."""
    most = max((u.total_tokens for u in usage), default=0) or 1
    rows = []
    for u in usage:
        cost, source = u.cost, "recorded" if u.cost is not None else ""
        price = None if prices is None else prices.get(u.model)
        if cost is None and price is not None:
            cost, source = price.cost(Usage(u.input_tokens, u.output_tokens)), "price table"
        rows.append(
            ModelCost(
                u.model,
                u.calls,
                u.input_tokens,
                u.output_tokens,
                cost,
                source,
                round(WIDTH * u.input_tokens / most, 2),
                round(WIDTH * u.output_tokens / most, 2),
            )
        )
    costs = [r.cost for r in rows]
    total = None if not costs or any(c is None for c in costs) else sum(c or 0.0 for c in costs)
    return CostTable(
        rows,
        sum(r.input_tokens for r in rows),
        sum(r.output_tokens for r in rows),
        total,
        prices is not None,
    )


@dataclass(frozen=True)
class Segment:
    """A part of the time bar: ``kind`` (``model``, ``tools``, ``waits``,
    ``other``), its seconds, and where it sits in :data:`WIDTH` units."""

    kind: str
    label: str
    seconds: float
    left: float
    width: float

    @property
    def title(self) -> str:
        return f"{self.label}: {fmt_duration(self.seconds) or '0 ms'}"


_LABELS = {
    "model": "model calls",
    "tools": "tools",
    "waits": "sleeping and waiting",
    "other": "the rest (the policy's code, other steps)",
}


def time_split(spent: Spent) -> list[Segment]:
    """The run's span split into model calls, tools, waits and the rest, as
    stacked segments (empty parts left out); none when the span is zero."""
    total = spent.total
    if total <= 0:
        return []
    parts = {"model": spent.model, "tools": spent.tools, "waits": spent.waits}
    parts["other"] = max(total - sum(parts.values()), 0.0)
    scale = max(total, sum(parts.values()))
    segments, left = [], 0.0
    for kind, seconds in parts.items():
        if seconds <= 0:
            continue
        width = WIDTH * seconds / scale
        segments.append(Segment(kind, _LABELS[kind], seconds, round(left, 2), round(width, 2)))
        left += width
    return segments
