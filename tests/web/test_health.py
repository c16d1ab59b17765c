"""Health across runs: the aggregations (status over time, latency
percentiles, failure reasons, queues and their workers) on rows, and the
``/health`` page over real SQLite and PostgreSQL stores."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stalwart.core.ledger import RunRecord
from stalwart.runner.routing import Fleet
from stalwart.stores.base import Store
from stalwart.web.health import (
    HEIGHT,
    failure_groups,
    latency_by_policy,
    percentile,
    queue_rows,
    read_health,
    status_over_time,
    window_runs,
)

from .conftest import client
from .health_seed import HOSTILE_TOOK, health_runs, health_workers, seed_health
from .web_app import HOSTILE

NOW = 1_800_000_000.0


def test_percentiles_are_values_that_occurred_by_nearest_rank() -> None:
    ten = [float(i) for i in range(1, 11)]
    assert [percentile(ten, q) for q in (50, 90, 99, 100)] == [5.0, 9.0, 10.0, 10.0]
    assert percentile([7.0], 50) == 7.0
    assert percentile([], 99) == 0.0


def test_latency_per_policy_counts_finished_runs_only_slowest_first() -> None:
    rows = latency_by_policy(health_runs(NOW))
    assert [(r.policy, r.runs) for r in rows] == [(HOSTILE, 4), ("alpha", 11)]
    bad, alpha = rows
    assert (bad.p50, bad.p90, bad.p99, bad.slowest) == (30.0, 50.0, 50.0, 50.0)
    # alpha: 1..10 s and the old run's 5 s
    assert (alpha.p50, alpha.p90, alpha.p99) == (5.0, 9.0, 10.0)
    assert bad.p99_x == 600.0 and alpha.p99_x == pytest.approx(120.0)


def test_status_over_time_counts_each_run_in_the_span_it_was_created() -> None:
    buckets = status_over_time(health_runs(NOW), NOW - 86400, NOW)
    assert len(buckets) == 24
    assert sum(b.total for b in buckets) == 18  # the three-day-old run is outside
    last = buckets[-1]
    assert last.counts == {"pending": 2, "running": 1, "suspended": 1, "succeeded": 1}
    assert buckets[-2].counts == {"succeeded": 1}
    assert buckets[3].counts == {"failed": 4}
    # the tallest span fills the height, its parts stacked from the bottom
    heights = {status: (y, h) for status, _, y, h in last.rects}
    assert sum(h for _, h in heights.values()) == pytest.approx(HEIGHT)
    assert heights["pending"][0] + heights["pending"][1] == pytest.approx(HEIGHT)


def test_failures_are_grouped_by_type_and_message_most_frequent_first() -> None:
    groups = failure_groups(health_runs(NOW), per_group=2)
    assert [(g.kind, g.message, g.count) for g in groups] == [
        ("ValueError", HOSTILE, 3),
        ("TimeoutError", "slow", 1),
    ]
    assert groups[0].runs == ("bad-0", "bad-1")  # the latest two
    assert (
        failure_groups([RunRecord("x", "p", "{}", "failed", error="not json")])[0].message
        == "not json"
    )


def test_queues_list_their_unfinished_runs_and_the_live_workers_serving_them() -> None:
    counts = {"pending": {"mail": 2}, "running": {"mail": 1}, "succeeded": {"default": 9}}
    workers = health_workers(NOW)
    gone = workers[0].__class__("h:3:gone", "v0", {}, ("mail",), 30.0, NOW - 999, NOW - 900)
    fleet = Fleet([*workers, gone], [], NOW)
    rows = {q.queue: q for q in queue_rows(counts, fleet)}
    assert (rows["mail"].pending, rows["mail"].running, rows["mail"].suspended) == (2, 1, 0)
    assert [w.owner for w in rows["mail"].workers or ()] == ["h:1:w1", "h:2:w2"]
    assert [w.owner for w in rows["default"].workers or ()] == ["h:2:w2"]  # it serves every queue
    assert rows["mail"].versions == ["v1", "v2<b>"]
    assert queue_rows(counts, None)[0].workers is None


async def test_the_window_is_read_by_pages_and_stops_at_its_limit(store: Store) -> None:
    now = time.time()
    for i in range(7):
        await store.create_run(
            RunRecord(f"r{i}", "p", "{}", created_at=now - 10 - i, updated_at=now)
        )
    await store.create_run(RunRecord("before", "p", "{}", created_at=now - 7200, updated_at=now))
    runs, more = await window_runs(store, now - 3600, now, most=1000)
    assert [r.id for r in runs] == [f"r{i}" for i in range(7)] and not more
    runs, more = await window_runs(store, now - 3600, now, most=5)
    assert len(runs) == 5 and more


async def test_health_read_from_the_store(store: Store) -> None:
    now = time.time()
    url = store.url
    await store.close()
    await seed_health(url, now)
    await store.open()
    health = await read_health(store, "24h", now=now + 1)
    assert health.totals == {
        "pending": 2, "running": 1, "suspended": 1, "succeeded": 10, "failed": 4, "cancelled": 0,
    }  # fmt: skip
    assert health.runs_read == 18 and not health.stopped_early
    bad = next(r for r in health.latencies if r.policy == HOSTILE)
    assert (bad.runs, bad.p50) == (len(HOSTILE_TOOK), 30.0)
    assert health.failures[0].count == 3 and health.fleet
    mail = next(q for q in health.queues if q.queue == "mail")
    assert (mail.pending, mail.running) == (2, 1) and mail.versions == ["v1", "v2<b>"]
    week = await read_health(store, "7d", now=now + 1)
    assert week.runs_read == 19
    with pytest.raises(ValueError, match="unknown window 'forever': one of 1h, 6h, 24h, 7d, 30d"):
        await read_health(store, "forever")


async def test_the_page_answers_a_bad_window_with_a_400_naming_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'health.db'}"
    await seed_health(url, time.time())
    async with client(url) as c:
        bad = await c.get("/health", params={"window": HOSTILE})
        good = await c.get("/health")
    assert bad.status_code == 400 and "unknown window" in bad.text
    assert "<script>alert" not in bad.text
    assert good.status_code == 200
    assert "<script>alert" not in good.text and "<img src=x" not in good.text
    assert '<b class="runs-read">18</b>' in good.text
