"""A guarded agent killed with SIGKILL after its guardrail's trip is recorded
ends, once resumed, with the same trip, without checking or asking the model again.

The child process (``guardrail_app.py``) runs the agent on a SQLite file and
holds still right after the guardrail's verdict is recorded, before the run
ends; the parent kills it there, and a fresh process recovers the run.
Guardrail checks, model replies and tool executions are counted from the
files the program appends to.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path

import pytest
from tests.crash import executions, kill, numbered_executions, spawn, wait_for_line

import stalwart as sw

APP = str(Path(__file__).with_name("guardrail_app.py"))
TRIPS = {
    "tool_call": ["guarded", "gatekeeper", "tool_call", "Lyon is out of bounds"],
    "output": ["guarded", "gatekeeper", "output", "the answer gives a password away"],
}


def _spawn(url: str, workdir: Path, action: str, stage: str) -> subprocess.Popen[str]:
    return spawn(APP, url, workdir, action, "guarded", stage)


async def _status(url: str) -> str:
    async with sw.Runner(url, serving=False) as runner:
        run = await runner.get_run("guarded")
        assert run is not None
        return run.status


@pytest.mark.parametrize("stage", ["tool_call", "output"])
def test_a_run_killed_after_its_guardrail_tripped_resumes_to_the_same_trip(
    tmp_path: Path, sqlite_url: str, stage: str
) -> None:
    first = _spawn(sqlite_url, tmp_path, "run", stage)
    (mark,) = wait_for_line(first, "checked ")[-1:]
    kill(first)
    assert first.returncode == -signal.SIGKILL
    # The trip is recorded (its step finished), the run is not over.
    assert mark == ("checked 1#1.1" if stage == "tool_call" else "checked 2")
    assert asyncio.run(_status(sqlite_url)) != "failed"
    checks = numbered_executions(tmp_path / "checks.txt")
    replies = numbered_executions(tmp_path / "model.txt")
    assert [pid for pid, _ in checks + replies] == [first.pid, first.pid]

    second = _spawn(sqlite_url, tmp_path, "recover", stage)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert "recovered 1" in out
    tripped = next(json.loads(line[8:]) for line in out.splitlines() if line.startswith("tripped "))
    assert tripped == TRIPS[stage]
    # Nothing ran again: the guardrail checked once, the model replied once, no tool ran.
    assert numbered_executions(tmp_path / "checks.txt") == checks
    assert numbered_executions(tmp_path / "model.txt") == replies
    assert executions(tmp_path / "tools.txt") == []
    assert asyncio.run(_status(sqlite_url)) == "failed"
