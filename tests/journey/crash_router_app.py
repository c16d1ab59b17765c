"""A router that sends the customer to a billing agent with an exclusive tool,
run on SQLite in a real process, for the crash test to kill.

The router's model picks billing; the billing model asks, in one round, for two
``charge`` calls (an exclusive tool) and one ``lookup``. In ``run`` mode the
first charge holds still once it has started (and the lookup, which takes no
lock, is recorded), so the parent's SIGKILL lands while it holds the lock,
the second charge waiting for it. In ``recover`` mode the program recovers
the run and prints its result.
A hook appends every call that really runs (start and end, with the process
id and the arguments) to a file outside the process.

    python crash_router_app.py STORE_URL WORKDIR run|recover RUN_ID
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.journey import Route, Router
from stalwart.testing import ScriptedLLM, call

WORKDIR = Path(".")
MODE = "run"
LOOKED_UP = asyncio.Event()  # set once the lookup is recorded (by the hook)


@sw.policy(exclusive=True)
async def charge(label: str) -> str:
    """Charge the customer's card.

    Args:
        label: What for.
    """
    if MODE == "run" and label == "a":
        # The unlocked sibling has finished: kill after it. (A guard, not a
        # measure: were the lookup held back, the parent's check says so.)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(LOOKED_UP.wait(), 30)
        print("holding", flush=True)
        await asyncio.sleep(3600)  # the parent kills us here, the lock held
    for _ in range(5):
        await asyncio.sleep(0)  # room for another charge to start, if nothing held it
    return f"charged {label}"


@sw.policy
async def lookup() -> str:
    """The customer's plan."""
    return "plan: fiber 1G"


billing = llm.Agent(
    ScriptedLLM(
        [
            [
                call("charge", _id="a", label="a"),
                call("charge", _id="b", label="b"),
                call("lookup", _id="c"),
            ],
            "Charged a and b; you are on fiber 1G.",
        ],
        name="billing_model",
    ),
    name="billing",
    tools=[charge, lookup],
)

router = Router(
    ScriptedLLM([call("route_to_billing")], name="desk_model"),
    routes=[Route(billing, "Charges and invoices.")],
    name="desk",
)


class Served(sw.Hook):
    """Appends each call that really runs to ``served.txt`` (start and end)."""

    def _write(self, event: str, info: sw.CallInfo) -> None:
        label = info.arguments.get("label")  # a tool's; a model's arguments are messages
        line = json.dumps([os.getpid(), event, info.name, info.key, label])
        with open(WORKDIR / "served.txt", "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    async def before_call(self, call: sw.CallInfo) -> None:
        self._write("start", call)

    async def after_call(self, call: sw.CallInfo, result: Any) -> None:
        self._write("end", call)
        if call.name == "lookup":
            LOOKED_UP.set()


async def main() -> None:
    global WORKDIR, MODE
    url, workdir, MODE, run_id = sys.argv[1:5]
    WORKDIR = Path(workdir)
    async with sw.Runner(url, hooks=[Served()], policies=[router], poll_interval=0.02) as runner:
        if MODE == "run":
            handle = await runner.start(router, message="Charge me for a and b", run_id=run_id)
            await handle.result(timeout=60)  # never: killed while it runs
            return
        handles = await runner.recover()
        print(f"recovered {len(handles)}", flush=True)
        answer = await sw.RunHandle(runner, run_id).result(timeout=60)
    print("answer " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
