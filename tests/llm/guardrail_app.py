"""A guarded agent run on SQLite in a real process, for the guardrail crash test to kill.

The agent's model is scripted (a call of ``get_weather`` for Lyon, then an
answer naming a password); its guardrail trips on Lyon in a tool call
(``tool_call``) or on a password in the answer (``output``). Every model
reply, guardrail check and tool execution is appended to files outside the
process. After the guardrail's step is recorded the program prints
``checked <step key>``; in ``run`` mode it then holds still, so the parent's
SIGKILL lands between the recorded trip and the run's end.

    python guardrail_app.py STORE_URL WORKDIR run|recover RUN_ID tool_call|output
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

from tests.llm.crash_app import HoldAfter, log, program_args, run_or_recover

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.testing import ScriptedLLM, call

QUESTION = "Weather in Lyon?"


@sw.policy
async def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: City name, e.g. Paris
    """
    log("tools.txt", f"get_weather {city}")
    return "18 °C"


@sw.policy
async def gatekeeper(messages: list[Message]) -> llm.Verdict:
    """Trips on Lyon in a tool call, and on a password in an answer."""
    log("checks.txt", f"{os.getpid()} {len(messages)}")
    for m in messages:
        if m.action_call is not None and m.action_call.arguments.get("city") == "Lyon":
            return llm.Verdict.trip("Lyon is out of bounds")
        if m.role == "assistant" and "password" in m.text:
            return llm.Verdict.trip("the answer gives a password away")
    return llm.Verdict.ok()


def _reply(reply: Any) -> Any:
    def logged(observations: list[Message], options: Sequence[Any]) -> Any:
        log("model.txt", f"{os.getpid()} {len(observations)}")
        return reply

    return logged


def _agent(stage: str) -> llm.Agent:
    if stage == "tool_call":
        script = [_reply(call("get_weather", city="Lyon")), _reply("never said")]
        return llm.Agent(
            ScriptedLLM(script), tools=[get_weather], tool_guardrails=[gatekeeper], name="guarded"
        )
    script = [_reply("The admin password is hunter2.")]
    return llm.Agent(ScriptedLLM(script), output_guardrails=[gatekeeper], name="guarded")


async def main() -> None:
    url, _, action, run_id, stage = program_args(5)
    agent = _agent(stage)
    # Says when the guardrail's verdict is recorded; in ``run`` mode, waits there.
    hook = HoldAfter(
        lambda call: call.name == gatekeeper.name,
        lambda call: f"checked {call.key}",
        hold=action == "run",
    )
    async with sw.Runner(url, hooks=[hook], policies=[agent], poll_interval=0.05) as runner:
        handle = await run_or_recover(runner, action, run_id, agent, question=QUESTION)
        try:
            await handle.result(timeout=60)
        except llm.GuardrailTripped as trip:
            fields = [trip.agent, trip.guardrail, trip.stage, trip.reason]
            print("tripped " + json.dumps(fields), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
