"""An agent whose refund waits for a person's approval, in a real process
for the crash test to kill.

In ``run`` mode the process starts the run, prints ``waiting <signal>``
once the run is suspended on the approval, and holds still, so the
parent's SIGKILL lands while the call waits for its decision. In
``approve`` mode a new process, a worker on the same store, sends the
approval and waits for the run to finish, printing ``result <json>``.
In ``approve-and-hang`` mode the process also approves, and the approved
refund, once started, prints ``refunding`` and holds still, so the kill
lands after the decision was taken and before the call's result was
recorded; ``recover`` mode is a worker that resumes the run, and sends
nothing. Each live model call and each refund appends a line to a file
outside the process.

``run-hurried`` is ``run`` for an agent whose refund waits three seconds
at most (``approval_timeout=3``): ``recover`` then finds the wait timed out.

    python approval_app.py STORE_URL WORKDIR run|run-hurried|approve|approve-and-hang|recover RUN_ID
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
from stalwart import Message
from stalwart.core.message import result_text
from stalwart.llm import Agent
from stalwart.testing import ScriptedLLM, call

WORKDIR = Path(".")
HANG = {"refund": False}


def _ran(what: str) -> None:
    with open(WORKDIR / f"{what}.txt", "a") as f:
        f.write(what + "\n")
        f.flush()
        os.fsync(f.fileno())


@sw.policy(approval=lambda amount: amount > 100)
async def refund(order: str, amount: float) -> str:
    """Refund an order."""
    _ran("refund")
    if HANG["refund"]:
        print("refunding", flush=True)
        await asyncio.sleep(3600)  # the process dies here
    return f"refunded {amount} on {order}"


def asks_for_a_refund(observations: list[Message], options: Sequence[Any]) -> Message:
    _ran("model")
    return call("refund", _id="c1", order="A-17", amount=250.0)


def says_what_happened(observations: list[Message], options: Sequence[Any]) -> str:
    _ran("model")
    return " | ".join(
        result_text(m.action_result) for m in observations if m.action_result is not None
    )


support = Agent(
    ScriptedLLM([asks_for_a_refund, says_what_happened], name="support_model"),
    instructions="Help the customer.",
    tools=[refund],
    name="support",
)

# The same refund, whose wait for a decision lasts three seconds at most.
hurried = Agent(
    ScriptedLLM([asks_for_a_refund, says_what_happened], name="support_model"),
    instructions="Help the customer.",
    tools=[sw.policy(refund, approval_timeout=3)],
    name="hurried_support",
)


async def main() -> None:
    global WORKDIR
    url, workdir, action, run_id = sys.argv[1:5]
    WORKDIR = Path(workdir)
    HANG["refund"] = action == "approve-and-hang"
    serving = action in ("approve", "recover")
    runner = sw.Runner(url, poll_interval=0.05, policies=[support, hurried], serving=serving)
    async with runner:
        if action == "recover":
            await runner.recover()
            result = await sw.RunHandle(runner, run_id).result(timeout=60)
            print("result " + json.dumps(result), flush=True)
            return
        if action in ("run", "run-hurried", "approve-and-hang"):
            agent = hurried if action == "run-hurried" else support
            await runner.start(agent, question="Refund order A-17", run_id=run_id)
            while True:
                run = await runner.get_run(run_id)
                if run.status == "suspended" and run.waiting_for:
                    break
                await asyncio.sleep(0.02)
            print(f"waiting {run.waiting_for}", flush=True)
            if action == "approve-and-hang":
                await runner.signal(run_id, run.waiting_for, True)
            await asyncio.sleep(3600)  # the process dies here
            return
        run = await runner.get_run(run_id)
        assert run.waiting_for is not None, run
        await runner.signal(run_id, run.waiting_for, {"c1": {"decision": "approve"}})
        result = await sw.RunHandle(runner, run_id).result(timeout=60)
        print("result " + json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
