"""A durable agent whose model calls the calc server's tools (a child process
of the kill test). ``python durable_agent.py DB RUN_ID`` starts or resumes
the run and prints its answer."""

import asyncio
import os
import sys
from pathlib import Path

import stalwart as sw
from stalwart import mcp
from stalwart.testing import ScriptedLLM, call

SERVER = [sys.executable, str(Path(__file__).with_name("calc_server.py"))]
model = ScriptedLLM([call("add", a=2, b=3), call("slow", text="five"), "the answer is 5"])


@sw.policy
async def agent(ctx: sw.Context, question: str) -> str:
    history = [sw.Message.user(question)]
    env = {k: os.environ[k] for k in ("PATH", "CALC_COUNT", "CALC_BLOCK") if k in os.environ}
    async with mcp.connect(SERVER, name="calc", env=env) as tools:
        while True:
            actions = await ctx.call(model, observations=history, options=tools)
            history += actions
            if not any(m.is_action_call for m in actions):
                return " | ".join(m.text for m in history[1:] if not m.is_action_call)


async def main(db: str, run_id: str) -> None:
    runner = sw.Runner(f"sqlite:///{db}")
    handle = await runner.start(agent, question="2+3?", run_id=run_id)
    print(await handle.result(), flush=True)
    await runner.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
