"""An agent run on SQLite in a real process, for the durable agent test to kill.

The model is OpenAI Chat Completions through the official SDK, served by a
replaying transport that answers each request by its turn (how many assistant
messages it holds), so a process that re-sent an old request would be served
again, visibly. Every request served and every tool execution is appended to
files outside the process. After each model call is recorded the program
prints ``model <step key>``; in ``run`` mode it then holds still after the
second one, so that the parent's SIGKILL lands right after that record.
``root`` runs the agent as the run itself; ``awaited`` runs a policy that
awaits the agent (``await agent(question=...)``), a step of that run.

    python durable_agent_app.py STORE_URL WORKDIR run|recover RUN_ID root|awaited
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).parents[2]))  # this repository, for tests.llm

from tests.llm.crash_app import (
    PAYLOADS,
    HoldAfter,
    assistant_turn,
    get_weather,
    log,
    mock_http_client,
    print_answer,
    program_args,
    run_or_recover,
)

import stalwart as sw
from stalwart import llm

QUESTION = "What's the weather and the time in Paris?"


@sw.policy
async def get_time(timezone: str) -> str:
    """Current local time in a time zone.

    Args:
        timezone: An IANA time zone, e.g. Europe/Paris
    """
    log("tools.txt", f"get_time {timezone}")
    return "14:05"


def _answers() -> dict[int, bytes]:
    weather = json.loads((PAYLOADS / "openai_chat_tool_call.json").read_text())
    time = copy.deepcopy(weather)
    (tc,) = time["choices"][0]["message"]["tool_calls"]
    tc["id"] = "call_Tm4nZ8xQ2wLp6sRt9yHc1dVb"
    tc["function"] = {"name": "get_time", "arguments": '{"timezone": "Europe/Paris"}'}
    text = json.loads((PAYLOADS / "openai_chat_text.json").read_text())
    return {n: json.dumps(body).encode() for n, body in enumerate((weather, time, text), 1)}


def client() -> openai.AsyncOpenAI:
    answers = _answers()

    def serve(http: Any, request: Any) -> Any:
        turn = assistant_turn(json.loads(request.read()))
        log("served.txt", f"{os.getpid()} {turn}")
        headers = {"content-type": "application/json"}
        return http.Response(200, headers=headers, content=answers[turn])

    return openai.AsyncOpenAI(
        api_key="test", max_retries=0, http_client=mock_http_client(openai, serve)
    )


model = llm.openai("gpt-4o", client=client())
agent = llm.Agent(
    model, instructions="Be brief.", tools=[get_weather, get_time], name="durable_agent"
)


@sw.policy
async def plan_trip(question: str) -> str:
    """A run that asks the agent as one of its steps."""
    answer: str = await agent(question=question)
    return answer


async def main() -> None:
    url, _, action, run_id, how = program_args(5)
    # Says when a model call is recorded; in ``run`` mode, waits after the second.
    hook = HoldAfter(
        lambda call: call.name == model.name,
        lambda call: f"model {call.key}",
        hold=action == "run",
        nth=2,
    )
    policies = [agent, plan_trip]
    async with sw.Runner(url, hooks=[hook], policies=policies, poll_interval=0.05) as runner:
        root = agent if how == "root" else plan_trip
        handle = await run_or_recover(runner, action, run_id, root, question=QUESTION)
        answer = await handle.result(timeout=60)
    print_answer(answer)


if __name__ == "__main__":
    asyncio.run(main())
