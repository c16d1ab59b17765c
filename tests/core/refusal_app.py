"""A run whose exclusive call is refused for a lock cycle, in a real process
for the crash test to kill.

Tool X holds lock "a" and asks for a tool needing "b"; tool Y holds "b" and
asks for one needing "a". In ``run`` mode X asks first, so Y's call closes the
cycle and is refused; Y then prints ``refused <result>`` and holds still, so
the parent's SIGKILL lands after the refusal and before Y's reply is
recorded. In ``recover`` mode Y asks only once X is done: nothing crosses,
and a call that is not answered from the ledger would run. Each tool that
runs appends its name to a file outside the process.

    python refusal_app.py STORE_URL WORKDIR run|recover RUN_ID
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))  # this repository, for tests.core

from tests.core._support import ask_for, result_texts

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM, call

WORKDIR = Path(".")
MODE = {"run": True}
EV: dict[str, asyncio.Event] = {}


def _ran(name: str) -> None:
    with open(WORKDIR / "ran.txt", "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


@sw.policy(exclusive="b")
async def el_needs_b() -> str:
    """Needs lock b."""
    _ran("el_needs_b")
    return "needs_b ran"


@sw.policy(exclusive="a")
async def el_needs_a() -> str:
    """Needs lock a."""
    _ran("el_needs_a")
    return "needs_a ran"


@sw.policy(exclusive="a")
async def el_x(ctx: sw.Context) -> str:
    """Holds lock a; asks for a tool needing lock b."""
    if MODE["run"]:
        await EV["b_held"].wait()
    text = await ask_for(ctx, "el_x_model", "el_needs_b", [el_needs_b])
    EV["x_done"].set()
    return text


@sw.policy(exclusive="b")
async def el_y_mid(ctx: sw.Context) -> str:
    """Holds lock b; asks for a tool needing lock a."""
    EV["b_held"].set()
    if MODE["run"]:
        await asyncio.sleep(0.5)  # order only: X is now waiting for lock b
    text = await ask_for(ctx, "el_mid_model", "el_needs_a", [el_needs_a])
    if MODE["run"]:
        print("refused " + json.dumps(text), flush=True)
        await asyncio.sleep(3600)  # the process dies here
    return text


@sw.policy
async def el_y(ctx: sw.Context) -> str:
    """No lock; asks for Y (lock b), after X is done when recovering."""
    if not MODE["run"]:
        await EV["x_done"].wait()
    return await ask_for(ctx, "el_y_model", "el_y_mid", [el_y_mid])


@sw.policy
async def el_top(ctx: sw.Context) -> list[str]:
    llm: Any = ScriptedLLM([[call("el_x"), call("el_y")]], name="el_top_model")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[el_x, el_y])
    return result_texts(out)


async def main() -> None:
    global WORKDIR
    url, workdir, action, run_id = sys.argv[1:5]
    WORKDIR = Path(workdir)
    MODE["run"] = action == "run"
    EV.update(b_held=asyncio.Event(), x_done=asyncio.Event())
    async with sw.Runner(url, policies=[el_top], serving=action != "run") as runner:
        if action == "run":
            handle = await runner.start(el_top, run_id=run_id)
        else:
            await runner.recover()
            handle = sw.RunHandle(runner, run_id)
        result = await handle.result(timeout=60)
        print("result " + json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
