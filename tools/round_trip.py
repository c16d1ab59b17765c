"""Which source files a step's round trip enters: `ctx.call` recorded on
SQLite, then answered from the ledger when the run resumes by replay.

    python tools/round_trip.py

Frames are traced in the run's own task only, from the `ctx.call` to its
value; a coroutine frame resumed after an await counts as entered again, so
the driver's frames, which only resume the run, are listed apart, as is the
event queue of the run's handle, a listener the engine publishes to.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from types import FrameType
from typing import Any

import stalwart as sw

_SRC = "/src/stalwart/"
# The driver only resumes the root coroutine; the handle's queue is a
# listener the engine publishes the step's events to, when a handle keeps them.
_BESIDE = {"runner/driver.py": "resumes the run", "runner/handle.py": "a listener"}

entered: dict[str, list[str]] = {"record": [], "replay": []}
_phase: dict[str, Any] = {"name": "record", "task": None}


def _trace(frame: FrameType, event: str, arg: object) -> None:
    if event == "call" and asyncio.current_task() is _phase["task"]:
        path = frame.f_code.co_filename
        if _SRC in path:
            name = path.split(_SRC, 1)[1]
            files = entered[_phase["name"]]
            if name not in files:
                files.append(name)


@sw.policy
async def add(a: int, b: int) -> int:
    return a + b


@sw.policy
async def root(ctx: sw.Context, n: int) -> int:
    _phase["name"] = "replay" if ctx.engine.replay else "record"
    _phase["task"] = asyncio.current_task()
    sys.settrace(_trace)
    try:
        out: int = await ctx.call(add, n, 2)
    finally:
        sys.settrace(None)
    await ctx.wait_for("go")
    return out


async def _until(runner: sw.Runner, run_id: str, status: str) -> None:
    # The status is the store's: polled, as another process would.
    while (await runner.get_run(run_id)).status != status:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with sw.Runner(f"sqlite:///{tmp}/ledger.db") as runner:
            for run_id in ("warm-up", "traced"):  # the first run pays the imports
                entered["record"].clear()
                entered["replay"].clear()
                await runner.start(root, 1, run_id=run_id)
                await _until(runner, run_id, "suspended")
                await runner.signal(run_id, "go", None)
                await _until(runner, run_id, "succeeded")
    every: list[str] = []
    for phase, files in entered.items():
        print(f"{phase}: {', '.join(files)}")
        every += [f for f in files if f not in every]
    own = [f for f in every if f not in _BESIDE]
    print(f"{len(own)} files on the step's path: {', '.join(sorted(own))}")
    print("beside it: " + ", ".join(f"{f} ({why})" for f, why in _BESIDE.items() if f in every))


if __name__ == "__main__":
    asyncio.run(main())
