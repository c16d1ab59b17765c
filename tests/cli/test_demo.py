"""`stalwart demo` end to end: a child process killed mid-run, resumed here.

What a user is promised: the steps the child finished come back from the
ledger, the rest run live, and no finished step runs twice (a counter file
outside both processes counts executions).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

import stalwart as sw
from stalwart.demo import run_demo

FINISHED_BEFORE_KILL = ["1", "1#1", "2", "2#1"]
AFTER_KILL = ["3", "3#1", "4", "4#1", "5"]


def test_stalwart_demo_in_a_subprocess(sqlite_url: str) -> None:
    url = sqlite_url
    proc = subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "demo", "--store", url],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "160", "NO_COLOR": "1"},
        timeout=120,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "SIGKILL while step 3 was running" in out
    assert "exit code -9" in out

    def keys(marker: str) -> list[str]:
        return re.findall(rf"{marker}\s+(\S+)\s", out)

    assert keys("✓ finished") == FINISHED_BEFORE_KILL
    assert keys("↺ replayed") == FINISHED_BEFORE_KILL
    assert keys("▶ ran live") == AFTER_KILL
    assert "✓ no finished step ran twice" in out
    assert "✓ the answer equals an uninterrupted run's" in out
    assert "Python 3.13 (released 2024-10-07) first offered a build without the GIL" in out
    assert "Python 3.8 (released 2019-10-14) introduced the walrus operator" in out

    # The counter table: one execution per step, two for the step in flight.
    rows = dict(re.findall(r"│ (\S+)\s+│ .*│ .*│ (\d+)\s+│", out))
    assert rows == {k: "2" if k == "3" else "1" for k in FINISHED_BEFORE_KILL + AFTER_KILL}

    # The ledger holds each step once, and the run succeeded.
    run_id = re.search(r"run\s+(demo-[0-9a-f]+)", out)
    assert run_id is not None

    async def ledger() -> tuple[str, list[str]]:
        async with sw.Runner(url, serving=False) as runner:
            rec = await runner.get_run(run_id.group(1))
            return rec.status, [s.key for s in await runner.steps(rec.id)]

    import asyncio

    status, steps = asyncio.run(ledger())
    assert status == "succeeded"
    assert sorted(steps) == sorted(FINISHED_BEFORE_KILL + AFTER_KILL)


async def test_demo_report(sqlite_url: str) -> None:
    url = sqlite_url
    console = Console(file=io.StringIO(), width=160)
    report = await run_demo(url, console, run_id="demo-test")
    assert report.before_kill == FINISHED_BEFORE_KILL
    assert report.replayed == FINISHED_BEFORE_KILL
    assert report.live == AFTER_KILL
    assert report.ran_twice == []
    assert report.executions == {k: 2 if k == "3" else 1 for k in FINISHED_BEFORE_KILL + AFTER_KILL}
    assert report.same_as_uninterrupted
    assert report.answer.endswith("Sources: python-3.13, python-3.8.")


def test_demo_with_a_bad_store_fails_cleanly(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "demo", "--store", "mysql://x/y"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith("error: unknown store URL 'mysql://x/y'")
    assert "Traceback" not in proc.stderr
