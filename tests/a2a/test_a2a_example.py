"""examples/a2a_pair.py runs as written: one agent served over A2A, the other
calling it as a tool; run again on the same stores, the writer's finished
run answers from its ledger."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "a2a_pair.py"

pytestmark = pytest.mark.slow


def test_the_a2a_pair_example_runs_and_runs_again_from_its_ledger(tmp_path: Path) -> None:
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), str(tmp_path / "stores")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "In French: Bonjour, le monde"
