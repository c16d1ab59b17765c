"""S8 and the runner roles, with a real SIGKILL: a process that
starts a run by id executes it and its children; re-running the script after
a crash must finish the run, children included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

APP = Path(__file__).with_name("crash_children_app.py")
ROOT = Path(__file__).resolve().parents[2]


def _launch(url: str, timeout: float, marks: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [sys.executable, str(APP), url, str(timeout), str(marks)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_rerunning_a_killed_script_finishes_its_run_and_children(
    sqlite_url: str, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    first = _launch(sqlite_url, 120, marks)
    try:
        deadline = time.monotonic() + 30
        while not ((marks / "child1").exists() and (marks / "child2").exists()):
            assert first.poll() is None, f"the first process ended early: {first.communicate()}"
            assert time.monotonic() < deadline, "the children never started"
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()

    second = _launch(sqlite_url, 8, marks)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0 and "result [10, 20]" in out, (
        "after a SIGKILL, re-running the script that starts run 'P' by id never finished "
        "it: the new runner (given both policies) resumes P, its own run, but not P's "
        "children, which the dead process held, so P waits for them "
        "forever (7776f51 finished it).\n"
        f"exit {second.returncode}\nstdout: {out}\nstderr tail: {err[-600:]}"
    )
