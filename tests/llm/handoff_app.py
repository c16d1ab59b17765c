"""A triage agent that hands to billing, run on SQLite in a real process, for
the handoff crash test to kill.

Each model call that really runs appends ``<pid> <model>`` to ``models.txt``
outside the process. In ``run`` mode the program prints ``handoff <step key>``
once the handoff step is recorded, then holds still, so that the parent's
SIGKILL lands after the handoff and before billing answers; ``recover``
resumes and prints each answer. ``root`` runs triage as the run itself;
``conversation`` sends it a first message in a Conversation (whose id is
RUN_ID), and on recovery that message again (same id) and a second one.

    python handoff_app.py STORE_URL WORKDIR run|recover RUN_ID root|conversation
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.testing import ScriptedLLM, call

QUESTION = "Why was I charged twice?"
FOLLOWUP = "And the invoice?"
WORKDIR = Path(".")


def _log(line: str) -> None:
    with open(WORKDIR / "models.txt", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _triage(observations: list[Message], options: Sequence[Any]) -> Message:
    _log(f"{os.getpid()} triage")
    return call("transfer_to_billing", _id="handoff-1")


def _billing(observations: list[Message], options: Sequence[Any]) -> str:
    _log(f"{os.getpid()} billing")
    question = [m.text for m in observations if m.role == "user"][-1]
    return f"billing answers: {question}"


billing = llm.Agent(ScriptedLLM([_billing], name="billing_llm"), name="billing")
triage = llm.Agent(ScriptedLLM([_triage], name="triage_llm"), name="triage", handoffs=[billing])


class HoldAfterHandoff(sw.Hook):
    """Says when the handoff step is recorded; in ``run`` mode, waits there."""

    def __init__(self, hold: bool) -> None:
        self.hold = hold

    async def after_call(self, call: sw.CallInfo, result: Any) -> None:
        if call.name.startswith("stalwart.handoff:"):
            print(f"handoff {call.key} {call.name}", flush=True)
            if self.hold:
                await asyncio.sleep(3600)  # the parent kills us here


async def main() -> None:
    global WORKDIR
    url, workdir, action, run_id, how = sys.argv[1:6]
    WORKDIR = Path(workdir)
    hook = HoldAfterHandoff(action == "run")
    async with sw.Runner(url, hooks=[hook], policies=[triage], poll_interval=0.05) as runner:
        if how == "conversation":
            chat = sw.Conversation(runner, triage, run_id)
            for i, message in enumerate([QUESTION, FOLLOWUP][: 1 if action == "run" else 2]):
                print("answer " + json.dumps(await chat.send(message, message_id=f"m{i}")))
            return
        if action == "run":
            handle = await runner.start(triage, question=QUESTION, run_id=run_id)
        else:
            handles = await runner.recover()
            print(f"recovered {len(handles)}", flush=True)
            handle = sw.RunHandle(runner, run_id)
        answer = await handle.result(timeout=60)
    print("answer " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
