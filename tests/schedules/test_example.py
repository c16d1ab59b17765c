"""examples/nightly_report.py runs as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_nightly_report_simulation(sqlite_url: str) -> None:
    store = sqlite_url
    out = subprocess.run(
        [sys.executable, "examples/nightly_report.py", "--store", store, "simulate"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "platform on 2027-01-09: 24 tickets opened, 18 closed",
        "platform on 2027-01-10: 56 tickets opened, 51 closed",
        "platform on 2027-01-11: 57 tickets opened, 51 closed",
        "every worker stops for three nights...",
        "platform on 2027-01-14: 20 tickets opened, 18 closed  "
        "(catch-up: one report for three missed nights)",
        "next tick: 2027-01-16 01:00 UTC",
    ]
    # The missed nights are said so in the log, by the schedule's name.
    assert "schedule 'nightly-report': ticks from 2027-01-13 01:00:00 UTC" in out.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "schedules", "list", "--store", store],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={
            "COLUMNS": "200",
            "PATH": "/usr/bin:/bin",
            "NO_COLOR": "1",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),  # the code under test
        },
    )
    assert listed.returncode == 0, listed.stderr
    assert "nightly-report" in listed.stdout
    assert "At 02:00 every day (Europe/Paris)" in listed.stdout
