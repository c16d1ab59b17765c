"""A journey killed with SIGKILL mid-message resumes without repeating a model call.

The child process (``crash_journey_app.py``) runs the support journey of the
example on SQLite. The parent kills it right after its second model call is
recorded: in the middle of the first message, after the journey moved from
IDENTIFY to DIAGNOSE (a recorded change) and before the tool that call asked
for ran. A fresh process recovers the run and holds the rest of the
conversation: it must finish the journey in the right step and state, and
serve only the model calls that had not been made.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path

from tests.crash import kill, numbered_executions, spawn, wait_for_marks

import stalwart as sw
from stalwart.core.ledger import StepRecord

APP = str(Path(__file__).with_name("crash_journey_app.py"))


def _spawn(url: str, workdir: Path, action: str) -> subprocess.Popen[str]:
    return spawn(APP, url, workdir, action, "ticket")


def _served(workdir: Path) -> list[tuple[int, int]]:
    """(pid, reply number) of each model call really served, in order."""
    return numbered_executions(workdir / "served.txt")


async def _steps(url: str) -> list[StepRecord]:
    async with sw.Runner(url, serving=False) as runner:
        return await runner.steps("ticket")


def test_a_journey_killed_mid_message_resumes_without_repeating_model_calls(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    url = sqlite_url
    first = _spawn(url, tmp_path, "run")
    progress = wait_for_marks(first, "model", 2)
    kill(first)
    assert first.returncode == -signal.SIGKILL
    assert progress == ["1", "3"]  # step 2 is the journey's move to DIAGNOSE

    before = asyncio.run(_steps(url))
    assert sorted(s.key for s in before) == ["1", "1#1", "2", "3"]
    [moved] = [s for s in before if s.name == "stalwart.journey"]
    assert json.loads(moved.output or "")["step"] == "DIAGNOSE"
    assert [n for _, n in _served(tmp_path)] == [1, 2]

    second = _spawn(url, tmp_path, "recover")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert "recovered 1" in out
    reply = next(json.loads(line[6:]) for line in out.splitlines() if line.startswith("reply "))
    assert reply["text"] == "Glad to hear it. Your ticket is closed; have a good day!"
    assert reply["step"] == "CONFIRM"
    assert reply["state"] == {
        "customer": "ada@example.com",
        "problem": "the router's firmware 1.0.2 drops the line",
        "fix": "router firmware updated to 1.0.7",
        "resolved": True,
    }

    served = _served(tmp_path)
    assert [n for _, n in served] == [1, 2, 3, 4, 5, 6, 7, 8]  # none twice
    assert {pid for pid, _ in served[2:]} == {second.pid}
    after = asyncio.run(_steps(url))
    moves = [json.loads(s.output or "")["step"] for s in after if s.name == "stalwart.journey"]
    assert moves == ["DIAGNOSE", "RESOLVE", "CONFIRM", "CONFIRM"]
    assert len([s for s in after if s.name == "line_test"]) == 1
