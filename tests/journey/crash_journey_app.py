"""The support journey run on SQLite in a real process, for the crash test to kill.

Its model is the example's script behind a policy that appends, to a file
outside the process, which reply of the script it served and in which
process: a model call repeated after a resume would show there twice. After
each model call is recorded the program prints ``model <step key>``; in
``run`` mode it holds still after the second one (mid first message, after
the journey moved from IDENTIFY to DIAGNOSE), so that the parent's SIGKILL
lands there. In ``recover`` mode it recovers the run and answers the
journey's replies with the example's next messages.

    python crash_journey_app.py STORE_URL WORKDIR run|recover RUN_ID
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart.core.message import Message
from stalwart.testing import ScriptedLLM

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_journey.py"
_spec = importlib.util.spec_from_file_location("examples_support_journey", EXAMPLE)
assert _spec is not None and _spec.loader is not None
example: Any = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = example
_spec.loader.exec_module(example)

WORKDIR = Path(".")
scripted = ScriptedLLM(example.SCRIPT)


def _replies_before(observations: Sequence[Message]) -> int:
    turns, inside = 0, False
    for m in observations:
        mine = m.role == "assistant" and m.actor == scripted.name
        if mine and not inside:
            turns += 1
        inside = mine
    return turns


@sw.policy(name="model")
async def model(
    ctx: sw.Context, observations: list[Message], options: Sequence[Any] = ()
) -> list[Message]:
    """The example's scripted model, logging each reply it really serves."""
    with open(WORKDIR / "served.txt", "a") as f:
        f.write(f"{os.getpid()} {_replies_before(observations) + 1}\n")
        f.flush()
        os.fsync(f.fileno())
    return await scripted(ctx, observations, options)


journey = example.support_journey(model)


class Progress(sw.Hook):
    """Says when a model call is recorded; in ``run`` mode, waits after the second."""

    def __init__(self, hold_after: int | None) -> None:
        self.hold_after = hold_after
        self.calls = 0

    async def after_call(self, call: sw.CallInfo, result: Any) -> None:
        if call.name != "model":
            return
        self.calls += 1
        print(f"model {call.key}", flush=True)
        if self.calls == self.hold_after:
            await asyncio.sleep(3600)  # the parent kills us here


async def main() -> None:
    global WORKDIR
    url, workdir, action, run_id = sys.argv[1:5]
    WORKDIR = Path(workdir)
    hook = Progress(2 if action == "run" else None)
    async with sw.Runner(url, hooks=[hook], policies=[journey], poll_interval=0.02) as runner:
        if action == "run":
            handle = await runner.start(journey, message=example.MESSAGES[0], run_id=run_id)
            await handle.result(timeout=60)  # never: killed while it runs
            return
        handles = await runner.recover()
        print(f"recovered {len(handles)}", flush=True)
        for n, text in enumerate(example.MESSAGES[1:], 1):
            await example.waiting_reply(runner, run_id, n)
            await runner.signal(run_id, "message", text)
        reply = await sw.RunHandle(runner, run_id).result(timeout=60)
    print("reply " + json.dumps({"text": reply.text, "step": reply.step, "state": reply.state}))


if __name__ == "__main__":
    asyncio.run(main())
