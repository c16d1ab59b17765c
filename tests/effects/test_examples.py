"""examples/payment_once.py is a program a user copies: it runs as written
and charges once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_payment_once_charges_once_though_the_charge_is_sent_twice(sqlite_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "examples/payment_once.py", "--store", sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "API: charged ch_1 for order-42:1/1; the answer gets lost",
        "API: order-42:1/1 again: answering with ch_1, no new charge",
        "order-42 paid by ch_1",
        "charges made: 1",
    ]
    assert "attempt 1 failed with ReadTimeout" in out.stderr  # the step's retry
