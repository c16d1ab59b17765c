"""docs/mcp.md's program and examples/mcp_agent.py, run as real programs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(90)


def test_the_docs_program_runs_and_replays(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "mcp.md").read_text()
    program = re.search(r"```python\n(.*?)```", text, re.S)
    assert program is not None
    path = tmp_path / "adder.py"
    path.write_text(program.group(1))
    first = subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "2 + 3 = 5"
    assert (tmp_path / "adder.db").exists()  # a durable run


def test_the_example_agent_uses_the_servers_tool(sqlite_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_agent.py"), "Capital of Peru?",
         "--store", sqlite_url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "The capital is Lima."
