"""The crash harness: spawn a program, wait for its marker, SIGKILL it, and
count what it executed from outside.

A crash test runs a real program (``python <program> <args>``) in a child
process, waits until it reaches a point it announces (a line on its standard
output, or a file it creates), kills it with SIGKILL, and then reads what ran
from files the program appends to (one line an execution), never from the
program's own memory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "executions",
    "kill",
    "numbered_executions",
    "spawn",
    "wait_for_files",
    "wait_for_line",
    "wait_for_marks",
]


def spawn(
    program: str | Path,
    *args: object,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdin: bool = False,
) -> subprocess.Popen[str]:
    """Start ``python program *args`` with text pipes for its output
    (``program`` may be ``"-m"``, the module following in ``args``).

    ``env`` adds to (or overrides) this process's environment; ``stdin``
    gives it a pipe to write its input to (``proc.stdin``), else it reads ours.
    """
    return subprocess.Popen(
        [sys.executable, str(program), *(str(a) for a in args)],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=None if env is None else {**os.environ, **env},
        cwd=cwd,
    )


def wait_for_line(proc: subprocess.Popen[str], prefix: str) -> list[str]:
    """Read the program's output up to the first line starting with
    ``prefix``; the lines read, stripped. Fails with its stderr if it ends
    first."""
    assert proc.stdout is not None
    seen = []
    while True:
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "the child died"
        seen.append(line.strip())
        if line.startswith(prefix):
            return seen


def wait_for_marks(proc: subprocess.Popen[str], prefix: str, count: int) -> list[str]:
    """Read the program's output until ``count`` lines ``<prefix> <mark>``
    have come; their marks, in order. Fails with its stderr if it ends
    first."""
    assert proc.stdout is not None
    marks: list[str] = []
    while len(marks) < count:
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "the child died"
        if line.startswith(prefix + " "):
            marks.append(line.split()[1])
    return marks


def wait_for_files(proc: subprocess.Popen[str], *paths: Path, timeout: float = 30) -> None:
    """Wait until every one of ``paths`` exists; fails if the program ends
    first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert proc.poll() is None, f"the program ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never created: {[str(p) for p in paths]}"
        time.sleep(0.05)


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the program and reap it."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)


def executions(path: Path) -> list[str]:
    """What a program appended to ``path``, one entry a line (none if it never
    wrote)."""
    return path.read_text().split() if path.exists() else []


def numbered_executions(path: Path) -> list[tuple[int, int]]:
    """(pid, number) of each execution a program appended to ``path`` as a
    line ``<pid> <number>``, in order: which process did the n-th thing."""
    lines = path.read_text().split("\n")
    return [(int(p), int(n)) for p, n in (line.split() for line in lines if line)]
