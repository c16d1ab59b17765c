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
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import openai

import stalwart as sw
from stalwart import llm

PAYLOADS = Path(__file__).with_name("payloads")
QUESTION = "What's the weather and the time in Paris?"
WORKDIR = Path(".")


def _log(name: str, line: str) -> None:
    with open(WORKDIR / name, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@sw.policy
async def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Current weather in a city.

    Args:
        city: City name, e.g. Paris
        unit: Temperature unit, celsius or fahrenheit.
    """
    _log("tools.txt", f"get_weather {city}")
    return {"temperature": 18, "unit": unit, "sky": "partly cloudy"}


@sw.policy
async def get_time(timezone: str) -> str:
    """Current local time in a time zone.

    Args:
        timezone: An IANA time zone, e.g. Europe/Paris
    """
    _log("tools.txt", f"get_time {timezone}")
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
    base = importlib.import_module("openai._base_client")
    http: Any = base.httpx2 if hasattr(base, "httpx2") else importlib.import_module("httpx")
    answers = _answers()

    def serve(request: Any) -> Any:
        body = json.loads(request.read())
        turn = 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")
        _log("served.txt", f"{os.getpid()} {turn}")
        headers = {"content-type": "application/json"}
        return http.Response(200, headers=headers, content=answers[turn])

    transport = http.MockTransport(serve)
    return openai.AsyncOpenAI(
        api_key="test", max_retries=0, http_client=http.AsyncClient(transport=transport)
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


class Progress(sw.Hook):
    """Says when a model call is recorded; in ``run`` mode, waits after the second."""

    def __init__(self, hold_after: int | None) -> None:
        self.hold_after = hold_after
        self.calls = 0

    async def after_call(self, call: sw.CallInfo, result: Any) -> None:
        if call.name != model.name:
            return
        self.calls += 1
        print(f"model {call.key}", flush=True)
        if self.calls == self.hold_after:
            await asyncio.sleep(3600)  # the parent kills us here


async def main() -> None:
    global WORKDIR
    url, workdir, action, run_id, how = sys.argv[1:6]
    WORKDIR = Path(workdir)
    hook = Progress(2 if action == "run" else None)
    policies = [agent, plan_trip]
    async with sw.Runner(url, hooks=[hook], policies=policies, poll_interval=0.05) as runner:
        if action == "run":
            root = agent if how == "root" else plan_trip
            handle = await runner.start(root, question=QUESTION, run_id=run_id)
        else:
            handles = await runner.recover()
            print(f"recovered {len(handles)}", flush=True)
            handle = sw.RunHandle(runner, run_id)
        answer = await handle.result(timeout=60)
    print("answer " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
