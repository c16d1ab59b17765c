"""Flows killed with SIGKILL mid-node and mid-batch resume correctly.

A child process (`crash_flow_app.py`) runs a flow on a SQLite file and is
killed at a chosen progress line; a fresh process resumes the same run id.
The final shared store must equal an uncrashed run's, and no exec whose
result was in the ledger when the process died may run again (each exec
appends its tag to a counter file before it does anything else).
"""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw

from . import crash_flow_app as app

APP = Path(__file__).with_name("crash_flow_app.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")


class Child:
    """The app in a child process, its output read line by line (by threads only)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(APP), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self.errors.extend(self.proc.stderr)

    def _next(self, deadline: float, wanted: str) -> str | None:
        try:
            return self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            errors = "".join(self.errors)
            raise AssertionError(f"no {wanted!r} in time; stderr:\n{errors}") from None

    def wait_for(self, wanted: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while wanted not in self.seen:
            line = self._next(deadline, wanted)
            if line is None:
                raise AssertionError(f"the app ended before {wanted!r}:\n{''.join(self.errors)}")
            self.seen.append(line)

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)
        assert self.proc.returncode == -signal.SIGKILL

    def result(self, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while (line := self._next(deadline, "RESULT")) is not None:
            self.seen.append(line)
        self.proc.wait(max(0.01, deadline - time.monotonic()))
        assert self.proc.returncode == 0, "".join(self.errors)
        result = [line for line in self.seen if line.startswith("RESULT ")]
        assert result, "".join(self.errors)
        return json.loads(result[-1][len("RESULT ") :])


def recorded_execs(db: Path, run_id: str) -> set[str]:
    """Tags of the execs whose result is in the ledger."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT key, name FROM steps WHERE run_id = ? AND name LIKE '%.exec'", (run_id,)
        ).fetchall()
    tags = set()
    for key, name in rows:
        if "#" in key:
            tags.add(f"item:{key.rsplit('#', 1)[1]}")
        else:
            tags.add(name.removesuffix(".exec").lower())
    return tags


def until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def uncrashed(scenario: str) -> Any:
    """The store an uncrashed run leaves (in this process, in memory)."""
    build, initial = app.SCENARIOS[scenario]
    path, app.COUNTER["path"] = app.COUNTER["path"], ""
    try:
        return sw.Runner().run_sync(build(), shared=initial())
    finally:
        app.COUNTER["path"] = path


def crash_then_resume(
    tmp_path: Path, scenario: str, stall: str, kill_at: Any
) -> tuple[Any, set[str], collections.Counter[str]]:
    db, counter = tmp_path / "ledger.db", tmp_path / "executions.txt"
    args = (str(db), "run-1", scenario, str(counter))
    child = Child(*args, stall)
    kill_at(child, db)
    child.kill()
    finished = recorded_execs(db, "run-1")
    resumed = Child(*args).result()
    return resumed, finished, collections.Counter(counter.read_text().split())


def test_killed_mid_node(tmp_path: Path) -> None:
    def at_slow(child: Child, db: Path) -> None:
        child.wait_for("stalled slow")

    result, finished, runs = crash_then_resume(tmp_path, "chain", "slow", at_slow)
    assert result == uncrashed("chain")
    assert result["trail"] == ["load", "clean", "count", "slow", "finish"]
    assert finished == {"load", "clean", "count"}
    assert runs == {"load": 1, "clean": 1, "count": 1, "slow": 2, "finish": 1}


def test_killed_mid_batch(tmp_path: Path) -> None:
    def at_item_70(child: Child, db: Path) -> None:
        child.wait_for("stalled item:70")

    result, finished, runs = crash_then_resume(tmp_path, "batch", "item:70", at_item_70)
    assert result == uncrashed("batch")
    assert finished == {f"item:{i}" for i in range(70)}
    assert all(runs[f"item:{i}"] == 1 for i in range(70))  # no finished exec ran again
    assert runs["item:70"] == 2  # the one in flight ran again
    assert all(runs[f"item:{i}"] == 1 for i in range(71, 100))


def test_killed_mid_parallel_batch(tmp_path: Path) -> None:
    def when_70_recorded(child: Child, db: Path) -> None:
        for i in range(100):
            child.wait_for(f"started item:{i}")
        until(lambda: len(recorded_execs(db, "run-1")) >= 70)

    result, finished, runs = crash_then_resume(tmp_path, "parallel", "item:70", when_70_recorded)
    assert result == uncrashed("parallel")
    assert finished == {f"item:{i}" for i in range(70)}
    assert all(runs[f"item:{i}"] == 1 for i in range(70))
    assert all(runs[f"item:{i}"] == 2 for i in range(70, 100))  # in flight: ran again
