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


def test_approvals_decides_one_by_one_denies_and_edits(sqlite_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "examples/approvals.py", "--store", sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        "waits for approval:1#0.1: Approve 2 tool calls: "
        'refund(order="A-17", amount=250.0); close_account(customer="ada")?'
    )
    assert lines[1] == 'waits for approval:1#0.3: Approve refund(order="A-17", amount=250.0)?'
    assert lines[2] == (
        "answer: A-17: a kettle, paid 250.00; refunded 100.00 on A-17; "
        "ApprovalDenied: Ada has an open dispute"
    )
    assert lines[3].startswith('decisions: {"c3":{"decision":"deny"')
    assert '"c2":{"decision":"edit","arguments":{"amount":100}}' in lines[3]
    assert lines[4] == "status: succeeded"
