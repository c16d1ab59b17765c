"""The README's quickstart is a program; it must run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_quickstart_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    quickstart = next(b for b in blocks if "run_sync" in b)
    out = subprocess.run(
        [sys.executable, "-c", quickstart], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Python 3.14 is the latest."


def test_example_command_runs() -> None:
    out = subprocess.run(
        [sys.executable, "examples/search_agent.py", "When was Python 3.12 released?"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=README.parent,
    )
    assert out.returncode == 0, out.stderr
    assert "October 2, 2023" in out.stdout


def test_declared_types_snippet_runs_and_replays(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    snippet = next(b for b in blocks if "register_type(Ticket)" in b)
    for attempt in range(2):  # the second run finds the finished run: read back, not re-run
        out = subprocess.run(
            [sys.executable, "-c", snippet],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert out.returncode == 0, (attempt, out.stderr)
        assert out.stdout.strip() == "{'ticket': Ticket(id=42, notes=['printer on fire'])}"
