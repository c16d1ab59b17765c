"""S8 and the runner roles, with a real SIGKILL: a process that
starts a run by id executes it and its children; re-running the script after
a crash must finish the run, children included."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.crash import kill, spawn, wait_for_files

APP = Path(__file__).with_name("crash_children_app.py")
ROOT = Path(__file__).resolve().parents[2]


def _launch(url: str, timeout: float, marks: Path) -> subprocess.Popen[str]:
    return spawn(APP, url, timeout, marks, env={"PYTHONPATH": str(ROOT / "src")})


def test_rerunning_a_killed_script_finishes_its_run_and_children(
    sqlite_url: str, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    first = _launch(sqlite_url, 120, marks)
    try:
        wait_for_files(first, marks / "child1", marks / "child2")
    finally:
        kill(first)

    second = _launch(sqlite_url, 8, marks)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0 and "result [10, 20]" in out, (
        "after a SIGKILL, re-running the script that starts run 'P' by id never finished "
        "it: the new runner (given both policies) resumes P, its own run, but not P's "
        "children, which the dead process held, so P waits for them "
        "forever (7776f51 finished it).\n"
        f"exit {second.returncode}\nstdout: {out}\nstderr tail: {err[-600:]}"
    )
