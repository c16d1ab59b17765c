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

sys.path.insert(0, str(Path(__file__).parents[2]))  # this repository, for tests.llm

from tests.llm.crash_app import HoldAfter, log, print_answer, program_args, run_or_recover

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.testing import ScriptedLLM, call

QUESTION = "Why was I charged twice?"
FOLLOWUP = "And the invoice?"


def _triage(observations: list[Message], options: Sequence[Any]) -> Message:
    log("models.txt", f"{os.getpid()} triage")
    return call("transfer_to_billing", _id="handoff-1")


def _billing(observations: list[Message], options: Sequence[Any]) -> str:
    log("models.txt", f"{os.getpid()} billing")
    question = [m.text for m in observations if m.role == "user"][-1]
    return f"billing answers: {question}"


billing = llm.Agent(ScriptedLLM([_billing], name="billing_llm"), name="billing")
triage = llm.Agent(ScriptedLLM([_triage], name="triage_llm"), name="triage", handoffs=[billing])


async def main() -> None:
    url, _, action, run_id, how = program_args(5)
    # Says when the handoff step is recorded; in ``run`` mode, waits there.
    hook = HoldAfter(
        lambda call: call.name.startswith("stalwart.handoff:"),
        lambda call: f"handoff {call.key} {call.name}",
        hold=action == "run",
    )
    async with sw.Runner(url, hooks=[hook], policies=[triage], poll_interval=0.05) as runner:
        if how == "conversation":
            chat = sw.Conversation(runner, triage, run_id)
            for i, message in enumerate([QUESTION, FOLLOWUP][: 1 if action == "run" else 2]):
                print("answer " + json.dumps(await chat.send(message, message_id=f"m{i}")))
            return
        handle = await run_or_recover(runner, action, run_id, triage, question=QUESTION)
        answer = await handle.result(timeout=60)
    print_answer(answer)


if __name__ == "__main__":
    asyncio.run(main())
