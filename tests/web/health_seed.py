"""Runs and workers whose health the ``/health`` page draws, written as rows
with known times, so every number the page shows is known: ``alpha``'s ten
runs took 1 to 10 s; the markup-named policy's four failed after 20 to 50 s,
three with a markup error message; the queue ``mail`` has two runs pending
and one running, served by two live workers."""

from __future__ import annotations

import json

from stalwart.core.ledger import RunRecord
from stalwart.stores import open_store
from stalwart.stores.versions import WorkerRecord

from .web_app import HOSTILE

HOUR = 3600.0
ALPHA_TOOK = [float(s) for s in range(1, 11)]
HOSTILE_TOOK = [20.0, 30.0, 40.0, 50.0]
WORKER_VERSION = "v2<b>"


def _error(kind: str, message: str) -> str:
    return json.dumps({"type": kind, "message": message})


def health_runs(now: float) -> list[RunRecord]:
    """The rows, created within the last day but one (three days old)."""
    runs = []
    for i, took in enumerate(ALPHA_TOOK):
        made = now - (2 * i + 1) * HOUR / 2  # one an hour, half past
        runs.append(
            RunRecord(f"alpha-{i}", "alpha", "{}", "succeeded", '"ok"', None, made, made + took)
        )
    for i, took in enumerate(HOSTILE_TOOK):
        made = now - 20 * HOUR - 600 - i * 60  # 20 h 10 min ago, a minute apart
        error = _error("builtins.ValueError", HOSTILE) if i < 3 else _error("TimeoutError", "slow")
        runs.append(RunRecord(f"bad-{i}", HOSTILE, "{}", "failed", None, error, made, made + took))
    for i in range(2):
        runs.append(
            RunRecord(
                f"mail-{i}",
                "alpha",
                "{}",
                "pending",
                created_at=now - 60,
                updated_at=now - 60,
                queue="mail",
            )
        )
    runs.append(
        RunRecord("mail-held", "alpha", "{}", "running", created_at=now - 30, updated_at=now - 30,
                  owner="h:9:held", lease_expires_at=now + 600, fence=1, queue="mail")
    )  # fmt: skip
    runs.append(
        RunRecord(
            "napping",
            "alpha",
            "{}",
            "suspended",
            created_at=now - 90,
            updated_at=now - 80,
            wake_at=now + 3600,
        )
    )
    runs.append(
        RunRecord(
            "old", "alpha", "{}", "succeeded", '"ok"', None, now - 72 * HOUR, now - 72 * HOUR + 5
        )
    )
    return runs


def health_workers(now: float) -> list[WorkerRecord]:
    return [
        WorkerRecord("h:1:w1", "v1", {"alpha": "v1"}, ("mail",), 30.0, now - 100, now),
        WorkerRecord("h:2:w2", WORKER_VERSION, {"alpha": "v2"}, None, 30.0, now - 100, now),
    ]


async def seed_health(url: str, now: float) -> None:
    store = open_store(url)
    assert store is not None
    await store.open()
    try:
        for run in health_runs(now):
            await store.create_run(run)
        for worker in health_workers(now):
            await store.beat_worker(worker)
    finally:
        await store.close()
