"""A run's steps on one time axis, as the run page draws them.

Each step is a bar from when it started to when it finished, in the order
steps were called (a step's children under it), so steps that ran at once
(the tool calls of one model reply, a ``gather``) are bars that overlap on
the axis, and are marked ``parallel``. A durable sleep or a wait for a
signal is a gap, drawn hatched and labelled with what it waited for: a
sleep from its record to the time it woke (its record holds the wake time),
a wait from its deadline record to the signal that ended it (or to now,
while the run still waits). A step that took more than one attempt says
how many: the ledger keeps the count, not when each attempt ran. A step
a later execution replayed from the ledger after the run resumed is
marked, and the resume drawn on the axis (:mod:`.replay` says what proves
one).

Read from records as plain data (:mod:`.values`); the template escapes
every name.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..core.ledger import TERMINAL, RunRecord, StepRecord
from .replay import replayed, resumes
from .steps import flatten, parent_key, step_tree
from .values import fmt_duration, load

__all__ = ["Bar", "Mark", "Spent", "Tick", "Timeline", "timeline"]

#: The axis's width in the drawing's own units (bars are placed on it).
AXIS = 1000.0
_MIN_WIDTH = 2.0  # a step that took no measurable time is still a visible sliver
_TICKS = 5


@dataclass(frozen=True)
class Bar:
    """A row of the timeline: a step's bar, or a wait's gap (``kind`` is
    ``step``, ``sleep`` or ``wait``), placed in axis units."""

    key: str
    name: str
    depth: int
    left: float
    width: float
    kind: str
    state: str  # ok, failed, parallel, waiting (a wait not over yet)
    label: str
    title: str
    attempts: int = 1
    replayed: str = ""  # why the step was read from the ledger on resume ("": it was not)


@dataclass(frozen=True)
class Tick:
    """A mark on the axis: where, and the time since the run began."""

    left: float
    label: str


@dataclass(frozen=True)
class Mark:
    """Where the run resumed, on the axis, and what proves it."""

    left: float
    title: str


@dataclass(frozen=True)
class Spent:
    """Where a run's time went, in seconds on the clock (steps that ran at
    once count once): model calls (steps whose arguments hold
    ``observations``, what every model takes), tool calls (the calls a
    model's reply asked for, keys ``…#n``), sleeps and waits; and the calls
    of each kind; ``total``: the timeline's whole span."""

    model: float = 0.0
    tools: float = 0.0
    waits: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    tools_summed: float = 0.0
    total: float = 0.0


@dataclass(frozen=True)
class Timeline:
    """The rows and the axis of a run's timeline, the span it covers, and
    where the time went."""

    bars: list[Bar]
    ticks: list[Tick]
    span: str
    spent: Spent = Spent()
    resumes: tuple[Mark, ...] = ()


def _covered(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``spans``."""
    total, reach = 0.0, float("-inf")
    for begin, end in sorted(spans):
        if end <= reach:
            continue
        total += end - max(begin, reach)
        reach = end
    return total


def _is_model_call(rec: StepRecord) -> bool:
    args = load(rec.args) if rec.args and '"observations"' in rec.args else None
    return isinstance(args, dict) and "observations" in args


def _signal_after(rec: StepRecord, steps: Mapping[str, StepRecord]) -> StepRecord | None:
    """The signal record that ended a wait whose deadline is ``rec``: the
    call after it under the same parent (``ctx.wait_for`` takes both keys)."""
    up, _, last = rec.key.rpartition(".")
    if not last.isdigit():
        return None
    nxt = steps.get(f"{up}.{int(last) + 1}" if up else str(int(last) + 1))
    return nxt if nxt is not None and nxt.kind.startswith("signal:") else None


def timeline(
    run: RunRecord, steps: Mapping[str, StepRecord], now: float | None = None
) -> Timeline | None:
    """The timeline of ``steps`` (those a page shows) of ``run``; None if none."""
    recs = [r for r in steps.values() if r.kind not in ("ask",)]
    if not recs:
        return None
    now = time.time() if now is None else now
    ends: list[float] = [r.finished_at for r in recs]
    spans: dict[str, tuple[float, float, str, str]] = {}  # key: begin, end, label, state
    for r in recs:
        if r.kind == "sleep":
            wake = load(r.output)
            until = float(wake) if isinstance(wake, int | float) else r.finished_at
            if run.status not in TERMINAL and run.wake_at is not None:
                until = min(until, max(now, r.finished_at))
            label = f"sleeps {fmt_duration(until - r.finished_at)}"
            spans[r.key] = (r.finished_at, until, label, "ok")
            ends.append(until)
        elif r.kind == "deadline":
            got = _signal_after(r, steps)
            if got is not None:
                name = got.kind.removeprefix("signal:")
                end, state = got.finished_at, "ok"
            else:
                name = run.waiting_for or "a signal"
                waiting = run.status == "suspended"
                end, state = (now, "waiting") if waiting else (r.finished_at, "ok")
            verb = "waited" if state == "ok" else "waits"
            label = f"{verb} {fmt_duration(end - r.finished_at)} for signal {name}"
            spans[r.key] = (r.finished_at, end, label, state)
            ends.append(end)
    start = min([run.created_at, *(r.started_at for r in recs if r.started_at)])
    end = max([run.updated_at, *ends])
    total = max(end - start, 1e-6)

    def place(begin: float, finish: float) -> tuple[float, float]:
        left = AXIS * (begin - start) / total
        width = max(AXIS * (finish - begin) / total, _MIN_WIDTH)
        return round(min(left, AXIS - _MIN_WIDTH), 2), round(min(width, AXIS - left), 2)

    shown = {r.key: r for r in recs}
    placed: dict[str, tuple[float, float]] = {}
    for key, r in shown.items():
        if key not in spans:
            placed[key] = (r.started_at or r.finished_at, r.finished_at)
    points = resumes(run, shown)
    bars: list[Bar] = []
    for depth, node in flatten(step_tree(shown)):
        if node.record is None:
            continue
        r = node.record
        if r.key in spans:
            begin, finish, label, state = spans[r.key]
            left, width = place(begin, finish)
            kind = "sleep" if r.kind == "sleep" else "wait"
            bars.append(Bar(r.key, r.name, depth, left, width, kind, state, label, label))
            continue
        begin, finish = placed[r.key]
        left, width = place(begin, finish)
        state = "failed" if r.error is not None else "ok"
        if state == "ok" and _overlaps_a_sibling(r.key, begin, finish, placed):
            state = "parallel"
        took = fmt_duration(finish - begin)
        label = took if r.attempts <= 1 else f"{took}, {r.attempts} attempts"
        title = f"{r.key} {r.name}: {label}"
        if state == "parallel":
            title += " (ran beside others)"
        point = replayed(r, points)
        why = (
            ""
            if point is None
            else f"replayed after the resume at +{fmt_duration(point.at - start)}"
        )
        if why:
            title += f"; {why}"
        bar = Bar(r.key, r.name, depth, left, width, "step", state, label, title, r.attempts, why)
        bars.append(bar)
    ticks = [
        Tick(round(AXIS * i / _TICKS, 2), "+" + fmt_duration(total * i / _TICKS))
        for i in range(_TICKS + 1)
    ]
    models = [placed[k] for k, r in shown.items() if k in placed and _is_model_call(r)]
    tools = [placed[k] for k in shown if k in placed and "#" in k]
    spent = Spent(
        model=_covered(models),
        tools=_covered(tools),
        waits=_covered([(b, e) for b, e, _, _ in spans.values()]),
        model_calls=len(models),
        tool_calls=len(tools),
        tools_summed=sum(e - b for b, e in tools),
        total=total,
    )
    marks = tuple(
        Mark(place(p.at, p.at)[0], f"resumed at +{fmt_duration(p.at - start)}: {p.why}")
        for p in points
    )
    return Timeline(bars, ticks, fmt_duration(total), spent, marks)


def _overlaps_a_sibling(
    key: str, begin: float, finish: float, placed: Mapping[str, tuple[float, float]]
) -> bool:
    """Whether another step of the same caller ran while this one did."""
    up = parent_key(key)
    for other, (b, f) in placed.items():
        if other != key and parent_key(other) == up and b < finish and begin < f:
            return True
    return False
