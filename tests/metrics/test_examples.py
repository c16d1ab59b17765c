"""examples/worker_metrics.py runs as written and reports what its runs did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_worker_metrics_example_counts_its_orders(sqlite_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "examples/worker_metrics.py", "--store", sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = set(out.stdout.splitlines())
    assert lines == {
        'stalwart_runs_finished_total{policy="order",queue="orders",status="succeeded"} 2.0',
        'stalwart_runs_finished_total{policy="order",queue="orders",status="failed"} 1.0',
        # Three reservations and two charges, then the piano's charge refused.
        'stalwart_step_seconds_count{outcome="succeeded",policy="order"} 5.0',
        'stalwart_step_seconds_count{outcome="failed",policy="order"} 1.0',
        'stalwart_runs{queue="orders",status="failed"} 1.0',
        'stalwart_runs{queue="orders",status="succeeded"} 2.0',
    }
