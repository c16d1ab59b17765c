"""The demo's child process, and the lines it tells the parent.

The child runs the agent on the store and prints one JSON line per finished
step (``{"event": "step", ...}``), then, in the middle of the step the parent
chose, one ``{"event": "paused", ...}`` line, and waits to be killed. The
parent reads the lines as data: a step's key and name and a short summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from ..core.events import CallInfo, Hook
from ..runner import Runner
from .agent import research
from .corpus import QUESTION
from .printout import describe, step_line

if TYPE_CHECKING:
    from asyncio.subprocess import Process

    from rich.console import Console

__all__ = ["Announce", "run_child", "spawn", "until_paused"]


class Announce(Hook):
    """Tells the parent, one JSON line per step, how far the child got."""

    async def after_call(self, call: CallInfo, result: Any) -> None:
        if call.key:
            summary = describe(call.name, result)
            line = {"event": "step", "key": call.key, "name": call.name, "summary": summary}
            print(json.dumps(line), flush=True)


async def run_child(store: str, run_id: str) -> None:
    """The child's part: run the agent on ``store``, announcing each step, until killed."""
    async with Runner(store, hooks=[Announce()], serving=False) as runner:
        await runner.run(research, question=QUESTION, run_id=run_id)


async def spawn(store: str, run_id: str, counter: str, pause_at: str) -> Process:
    """Start the child: ``python -m stalwart.demo child``, its steps on its stdout."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "stalwart.demo",
        "child",
        "--store",
        store,
        "--run-id",
        run_id,
        "--counter",
        counter,
        "--pause-at",
        pause_at,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def until_paused(
    proc: Process, console: Console, deadline: float
) -> tuple[list[str], dict[str, Any]]:
    """Relay the child's steps until it says it is paused mid-step."""
    assert proc.stdout is not None and proc.stderr is not None
    finished: list[str] = []
    while True:
        line = b""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                line = await proc.stdout.readline()
        if not line:
            if proc.returncode is None:
                proc.kill()
            err = (await proc.stderr.read()).decode(errors="replace").strip()
            raise RuntimeError(
                "the demo's child process stopped before its pause point"
                + (f":\n{err}" if err else " (timed out)")
            )
        event = json.loads(line)
        if event["event"] == "paused":
            return finished, event
        finished.append(event["key"])
        step_line(
            console, "[green]✓ finished[/]", event["key"], event["name"], "", event["summary"]
        )
