"""A routed run killed with SIGKILL while an exclusive tool holds its lock
resumes on the same route, runs the exclusive calls one at a time, and runs
nothing again that had finished.

The child (``crash_router_app.py``) runs, on SQLite, a router whose model
picks the billing agent; the billing model asks in one round for two calls of
the exclusive ``charge`` and one ``lookup``. The first process is killed while
the first charge holds the lock: the second charge is waiting for it, the
lookup has finished. A fresh process recovers the run.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.crash import kill, spawn

import stalwart as sw

APP = str(Path(__file__).with_name("crash_router_app.py"))


def _spawn(url: str, workdir: Path, mode: str) -> subprocess.Popen[str]:
    return spawn(APP, url, workdir, mode, "desk-1")


def _served(workdir: Path) -> list[tuple[int, str, str, str, str | None]]:
    lines = (workdir / "served.txt").read_text().splitlines()
    return [tuple(json.loads(line)) for line in lines if line]  # type: ignore[misc]


def _calls(served: list[Any], pid: int) -> list[str]:
    """``event name(label)`` of what ran in process ``pid``, in order."""
    out = []
    for p, event, name, _key, label in served:
        if p == pid:
            out.append(f"{event} {name}" + (f"({label})" if label else ""))
    return out


def test_a_routed_run_killed_inside_an_exclusive_tool_resumes_without_repeats(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    url = sqlite_url
    first = _spawn(url, tmp_path, "run")
    assert first.stdout is not None
    line = first.stdout.readline()
    assert line == "holding\n", first.stderr.read() if first.stderr else "the child died"
    kill(first)
    assert first.returncode == -signal.SIGKILL

    before = _calls(_served(tmp_path), first.pid)
    assert before.count("start charge(a)") == 1
    assert "start charge(b)" not in before  # it waited for the lock the first charge held
    assert "end lookup" in before  # a tool without a lock was not held back

    second = _spawn(url, tmp_path, "recover")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert "recovered 1" in out
    answer = next(json.loads(x[7:]) for x in out.splitlines() if x.startswith("answer "))
    assert answer == "Charged a and b; you are on fiber 1G."

    after = _calls(_served(tmp_path), second.pid)
    # The route was chosen once, in the first process: not asked again, not re-run.
    assert not any(c.endswith(("desk_model", "route_to_billing", "lookup")) for c in after)
    # The in-flight charge ran again (at least once, S3); the waiting one ran once;
    # and they ran one after the other, under the lock.
    assert [c for c in after if "charge" in c] == [
        "start charge(a)",
        "end charge(a)",
        "start charge(b)",
        "end charge(b)",
    ]
    assert [c for c in after if "billing_model" in c] == [
        "start billing_model",
        "end billing_model",
    ]

    async def steps() -> list[str]:
        async with sw.Runner(url, serving=False) as runner:
            return sorted(s.key for s in await runner.steps("desk-1"))

    assert asyncio.run(steps()) == ["1", "1#1", "2", "2.1", "2.1#1", "2.1#2", "2.1#3", "2.2"]
