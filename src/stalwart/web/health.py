"""Health across runs: the ``/health`` page and the aggregations it draws.

What it reads, and what that costs: the runs created within a window (the
last hour, day, week; ``?window=24h``), newest first, a page of rows at a
time by keyset (:meth:`~stalwart.stores.Store.list_runs`), at most
:data:`MOST_RUNS` of them (the page says when it stopped there); one count
of the whole store by status and queue (:meth:`~stalwart.stores.Store.count_runs`,
one query); and the workers and versions the store keeps. No step is read:
every number is a run row's (its status, policy, queue, times, error).

* **Status over time**: the window cut into :data:`BUCKETS` spans, and the
  runs created in each by their status now.
* **Latency per policy**: a finished run's time from creation to outcome
  (its row's ``updated_at - created_at``), percentiles by nearest rank.
* **Failure reasons**: failed runs grouped by their error's type and
  message, the most frequent first, each with links to its latest runs.
* **Queues**: each queue's runs waiting (pending), held (running) and
  suspended, across the whole store, with the live workers serving it and
  their versions (:mod:`stalwart.runner.routing`).

The functions below take rows and return plain data; the template escapes
every name and message, and numbers alone reach the drawing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..core.ledger import RunRecord
from ..runner.routing import Fleet, fleet_of
from ..stores import Store
from ..stores.versions import WorkerRecord
from .values import clip, load

__all__ = [
    "BUCKETS",
    "DEFAULT_WINDOW",
    "MOST_RUNS",
    "WINDOWS",
    "Bucket",
    "Failure",
    "Health",
    "Latency",
    "QueueRow",
    "failure_groups",
    "latency_by_policy",
    "percentile",
    "queue_rows",
    "read_health",
    "status_over_time",
    "window_runs",
]

#: The windows the page offers, by the name its address uses.
WINDOWS: dict[str, float] = {
    "1h": 3600.0,
    "6h": 6 * 3600.0,
    "24h": 86400.0,
    "7d": 7 * 86400.0,
    "30d": 30 * 86400.0,
}
DEFAULT_WINDOW = "24h"
#: Runs read at most for one page: the newest of the window.
MOST_RUNS = 5000
_PAGE = 500
#: Spans the status chart cuts the window into.
BUCKETS = 24
#: Failure groups shown, and runs linked from each.
FAILURE_GROUPS = 20
RUNS_PER_GROUP = 5
STATUSES = ("pending", "running", "suspended", "succeeded", "failed", "cancelled")
#: The drawing's width and the status chart's height, in its own units.
WIDTH = 600.0
HEIGHT = 120.0


@dataclass(frozen=True)
class Bucket:
    """A span of the window: the runs created in it by status now, and the
    stacked bars that draw them (``(status, count, y, height)``)."""

    start: float
    end: float
    counts: dict[str, int]
    left: float
    width: float
    rects: tuple[tuple[str, int, float, float], ...] = ()

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Latency:
    """A policy's finished runs: how many, and their durations' percentiles
    in seconds; ``p50_x`` and ``p99_x`` place them on the chart's scale."""

    policy: str
    runs: int
    p50: float
    p90: float
    p99: float
    slowest: float
    p50_x: float = 0.0
    p90_x: float = 0.0
    p99_x: float = 0.0


@dataclass(frozen=True)
class Failure:
    """Failed runs with one error type and message: how many, the latest's
    time, and the ids of the latest few."""

    kind: str
    message: str
    count: int
    latest_at: float
    runs: tuple[str, ...]


@dataclass(frozen=True)
class QueueRow:
    """A queue: its runs by status across the store, and the live workers
    serving it (None: the store keeps no workers)."""

    queue: str
    pending: int
    running: int
    suspended: int
    workers: tuple[WorkerRecord, ...] | None

    @property
    def versions(self) -> list[str]:
        return sorted({w.version for w in self.workers or ()})


@dataclass(frozen=True)
class Health:
    """Everything the page shows, for the window ending ``now``."""

    window: str
    since: float
    now: float
    runs_read: int
    stopped_early: bool
    totals: dict[str, int]
    buckets: list[Bucket]
    latencies: list[Latency]
    failures: list[Failure]
    queues: list[QueueRow]
    fleet: bool
    most: int = field(default=0)


# -- the aggregations --------------------------------------------------------
def status_over_time(
    runs: Iterable[RunRecord], since: float, now: float, buckets: int = BUCKETS
) -> list[Bucket]:
    """``runs`` counted by status in ``buckets`` equal spans of
    ``[since, now)`` by their creation time (others are left out)."""
    span = max(now - since, 1e-9)
    counts: list[dict[str, int]] = [{} for _ in range(buckets)]
    for r in runs:
        if not since <= r.created_at < now:
            continue
        i = min(int((r.created_at - since) / span * buckets), buckets - 1)
        counts[i][r.status] = counts[i].get(r.status, 0) + 1
    tallest = max((sum(c.values()) for c in counts), default=0) or 1
    step = WIDTH / buckets
    out = []
    for i, c in enumerate(counts):
        rects, y = [], HEIGHT
        for status in STATUSES:
            n = c.get(status, 0)
            if n:
                h = HEIGHT * n / tallest
                y -= h
                rects.append((status, n, round(y, 2), round(h, 2)))
        start = since + span * i / buckets
        out.append(
            Bucket(
                start,
                start + span / buckets,
                {s: c[s] for s in STATUSES if s in c},
                round(step * i + 1, 2),
                round(step - 2, 2),
                tuple(rects),
            )
        )
    return out


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 < q <= 100) of sorted values, by nearest
    rank: a value that occurred; 0.0 for none."""
    if not ordered:
        return 0.0
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[min(rank, len(ordered)) - 1]


def latency_by_policy(runs: Iterable[RunRecord]) -> list[Latency]:
    """Each policy's finished runs' durations, slowest p99 first."""
    by_policy: dict[str, list[float]] = {}
    for r in runs:
        if r.status in ("succeeded", "failed", "cancelled"):
            by_policy.setdefault(r.policy, []).append(max(r.updated_at - r.created_at, 0.0))
    rows = []
    for name, took in by_policy.items():
        took.sort()
        rows.append(
            Latency(
                name,
                len(took),
                percentile(took, 50),
                percentile(took, 90),
                percentile(took, 99),
                took[-1],
            )
        )
    scale = max((r.slowest for r in rows), default=0.0) or 1.0

    def x(v: float) -> float:
        return round(WIDTH * v / scale, 2)

    placed = [
        Latency(r.policy, r.runs, r.p50, r.p90, r.p99, r.slowest, x(r.p50), x(r.p90), x(r.p99))
        for r in rows
    ]
    return sorted(placed, key=lambda r: (-r.p99, r.policy))


def _reason(error: str | None) -> tuple[str, str]:
    """A recorded error's type (its last dotted part) and message."""
    tree = load(error)
    if isinstance(tree, dict):
        kind = str(tree.get("type") or "error").rsplit(".", 1)[-1]
        return clip(kind), clip(str(tree.get("message", "")))
    return "error", clip("" if error is None else str(tree))


def failure_groups(
    runs: Iterable[RunRecord], most: int = FAILURE_GROUPS, per_group: int = RUNS_PER_GROUP
) -> list[Failure]:
    """Failed ``runs`` grouped by error type and message, the most frequent
    first (then the latest), at most ``most`` groups, each naming its
    latest ``per_group`` runs."""
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for r in runs:
        if r.status == "failed":
            groups.setdefault(_reason(r.error), []).append(r)
    out = []
    for (kind, message), rs in groups.items():
        rs.sort(key=lambda r: (-r.updated_at, r.id))
        out.append(
            Failure(kind, message, len(rs), rs[0].updated_at, tuple(r.id for r in rs[:per_group]))
        )
    out.sort(key=lambda f: (-f.count, -f.latest_at, f.kind, f.message))
    return out[:most]


def queue_rows(counts: Mapping[str, Mapping[str, int]], fleet: Fleet | None) -> list[QueueRow]:
    """Every queue that has runs or a worker naming it, with its unfinished
    runs (``counts``: :meth:`~stalwart.stores.Store.count_runs`) and the
    live workers that serve it (a worker of no named queue serves all)."""
    live = [] if fleet is None else fleet.live
    names = {q for by_queue in counts.values() for q in by_queue}
    names |= {q for w in live for q in w.queues or ()}
    rows = []
    for q in sorted(names):
        serving = None
        if fleet is not None:
            serving = tuple(w for w in live if w.queues is None or q in w.queues)
        rows.append(
            QueueRow(
                q,
                counts.get("pending", {}).get(q, 0),
                counts.get("running", {}).get(q, 0),
                counts.get("suspended", {}).get(q, 0),
                serving,
            )
        )
    return rows


# -- reading the store ---------------------------------------------------------
async def window_runs(
    store: Store, since: float, now: float, most: int = MOST_RUNS
) -> tuple[list[RunRecord], bool]:
    """The runs created in ``[since, now)``, newest first, at most ``most``,
    read by keyset a page at a time; and whether more were left unread."""
    runs: list[RunRecord] = []
    before: tuple[float, str] | None = None
    while len(runs) < most:
        want = min(_PAGE, most - len(runs))
        rows = await store.list_runs(
            None, want, created_after=since, created_before=now, before=before
        )
        runs.extend(rows)
        if len(rows) < want:
            return runs, False
        before = (rows[-1].created_at, rows[-1].id)
    more = await store.list_runs(None, 1, created_after=since, created_before=now, before=before)
    return runs, bool(more)


async def read_health(
    store: Store,
    window: str = DEFAULT_WINDOW,
    now: float | None = None,
    most: int = MOST_RUNS,
) -> Health:
    """What the health page shows for ``window`` (a name in :data:`WINDOWS`;
    ValueError naming it otherwise)."""
    if window not in WINDOWS:
        raise ValueError(f"unknown window {window[:40]!r}: one of {', '.join(WINDOWS)}")
    now = time.time() if now is None else now
    since = now - WINDOWS[window]
    runs, more = await window_runs(store, since, now, most)
    counts = await store.count_runs()
    fleet = await fleet_of(store)
    totals = {s: 0 for s in STATUSES}
    for r in runs:
        totals[r.status] = totals.get(r.status, 0) + 1
    return Health(
        window,
        since,
        now,
        len(runs),
        more,
        totals,
        status_over_time(runs, since, now),
        latency_by_policy(runs),
        failure_groups(runs),
        queue_rows(counts, fleet),
        fleet is not None and bool(fleet.workers),
        most,
    )
