"""examples/mcp_asking.py, run as a real program twice: the first run waits
for the server's question to the user; the second answers it and finishes,
without asking the model for the summary again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mcp_asking.py"
pytestmark = pytest.mark.timeout(120)


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_example_waits_for_the_user_then_publishes(sqlite_url: str) -> None:
    first = _run("--store", sqlite_url, "MCP")
    assert first.strip().endswith(
        "The run waits for the signal 'elicitation': answer with --answer JSON"
    )
    second = _run("--store", sqlite_url, "--answer", '{"approve": true}')
    assert "[server log] summary of MCP: MCP keeps agents' work durable." in second
    assert second.strip().endswith("Done: Published: MCP keeps agents' work durable.")
    listed = subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "runs", "show", "newsroom-1", "--json",
         "--store", sqlite_url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    names = [s["name"] for s in json.loads(listed.stdout)["steps"]]
    assert names.count("newsroom_model") == 3  # sampled once, and the agent's two rounds
    assert names.count("publish") == 1
