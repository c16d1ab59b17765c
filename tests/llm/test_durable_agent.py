"""An agent killed with SIGKILL after its second model call resumes without repeating either.

Both as the run itself and awaited as a step of another policy's run
(``await agent(question=...)``, the way any policy is awaited inside a run).

The child process (``durable_agent_app.py``) runs a tool-calling agent on
SQLite, its model served through the official OpenAI SDK by a replaying
transport that logs every request it serves. The parent kills the child right
after the second model call is recorded, then a fresh process recovers the
run: it must finish the run with the answer, serve only the third model call,
and run only the tool calls that had not run.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path

import pytest
from tests.crash import kill, numbered_executions, spawn, wait_for_marks

import stalwart as sw
from stalwart import llm
from stalwart.core.ledger import StepRecord

APP = str(Path(__file__).with_name("durable_agent_app.py"))


def _spawn(url: str, workdir: Path, action: str, how: str) -> subprocess.Popen[str]:
    return spawn(APP, url, workdir, action, "trip", how)


def _served(workdir: Path) -> list[tuple[int, int]]:
    """(pid, turn) of each model request the transport served, in order."""
    return numbered_executions(workdir / "served.txt")


async def _steps(url: str) -> list[StepRecord]:
    async with sw.Runner(url, serving=False) as runner:
        return await runner.steps("trip")


@pytest.mark.parametrize("how", ["root", "awaited"])
def test_an_agent_killed_after_its_second_model_call_resumes_without_repeating_them(
    tmp_path: Path, sqlite_url: str, how: str
) -> None:
    url = sqlite_url
    # The agent's steps: the run's own, or under the step of the awaiting policy.
    at = "" if how == "root" else "1."
    first = _spawn(url, tmp_path, "run", how)
    progress = wait_for_marks(first, "model", 2)
    kill(first)
    assert first.returncode == -signal.SIGKILL
    assert progress == [f"{at}1", f"{at}2"]  # the step keys of the two model calls

    served_before = _served(tmp_path)
    assert [turn for _, turn in served_before] == [1, 2]
    before = {s.key for s in asyncio.run(_steps(url))}
    assert before == {f"{at}1", f"{at}1#1", f"{at}2"}  # the second call's tool had not run yet

    second = _spawn(url, tmp_path, "recover", how)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    answer = next(json.loads(line[7:]) for line in out.splitlines() if line.startswith("answer "))
    assert answer == "It is 18 °C and partly cloudy in Paris right now."
    assert "recovered 1" in out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("model ")] == [f"{at}3"]

    served_after = _served(tmp_path)[len(served_before) :]
    assert [turn for _, turn in served_after] == [3]  # neither earlier call was sent again
    assert {pid for pid, _ in served_after} == {second.pid}
    tools = (tmp_path / "tools.txt").read_text().split()
    assert tools == ["get_weather", "Paris", "get_time", "Europe/Paris"]  # each ran once

    steps = asyncio.run(_steps(url))
    mine = sorted(s.key for s in steps if s.key.startswith(at))
    assert mine == [f"{at}{k}" for k in ("1", "1#1", "2", "2#1", "3")]
    if at:  # the awaited agent is one recorded step, holding its answer
        (asked,) = [s for s in steps if s.key == "1"]
        assert asked.name == "durable_agent"
        assert json.loads(asked.output or "null") == answer
    # Usage is the three calls' (two tool calls at 96 + 16, the answer at 128 + 15).
    assert llm.run_usage(steps) == llm.Usage(96 + 96 + 128, 16 + 16 + 15)
