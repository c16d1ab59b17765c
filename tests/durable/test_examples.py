"""The durable examples are programs a user copies: each runs as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_ticket_triage_survives_a_restart_and_keeps_its_types(sqlite_url: str) -> None:
    store = sqlite_url
    out = subprocess.run(
        [sys.executable, "examples/ticket_triage.py", "--store", store],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "event: T-1042: high priority for platform, waiting for approval"
    assert lines[1].endswith("suspended")
    assert "priority=<Priority.HIGH: 'high'>" in lines[2]
    assert "approved_by='dana@oncall'" in lines[2]
    assert len(lines) == 3
