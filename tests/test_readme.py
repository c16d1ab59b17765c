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
