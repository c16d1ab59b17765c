"""``stalwart signal`` with a payload holding a lone surrogate (``"\\ud800"``,
legal JSON) says what cannot be recorded and where, in one line, and exits
1; nothing is queued: run as a real process on a real SQLite file."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import stalwart as sw

ROOT = Path(__file__).resolve().parents[2]


@sw.policy
async def approval(ctx: sw.Context, order: str) -> str:
    decision = await ctx.wait_for("approve")
    return f"{order}: {'shipped' if decision.get('ok') else 'held'}"


def stalwart(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stalwart.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"},
    )


def test_a_signal_payload_holding_one_is_one_line_and_exit_1(sqlite_url: str) -> None:
    store = sqlite_url

    async def enqueue() -> None:
        async with sw.Runner(store, policies=[approval]) as runner:
            await runner.enqueue(approval, "A", run_id="c-1")

    asyncio.run(enqueue())
    done = stalwart("signal", "c-1", "approve", '{"ok": "\\ud800"}', "--store", store)
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: signal 'approve'['ok']: the text holds U+D800"), line

    async def run_it() -> str | None:
        async with sw.Runner(store) as runner:
            await runner.signal("c-1", "approve", {"ok": False})
        stop = asyncio.Event()
        worker = sw.Runner(store, policies=[approval], poll_interval=0.05)
        serving = asyncio.create_task(worker.serve(stop))
        try:
            async with asyncio.timeout(30):
                while (run := await worker.get_run("c-1")).status != "succeeded":
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            await serving
        return run.result

    assert asyncio.run(run_it()) == '"A: held"'  # the refused payload was never queued
