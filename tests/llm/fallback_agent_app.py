"""An agent on a fallback model, run on SQLite in a real process, for a crash test to kill.

The chain is OpenAI Chat Completions, then Anthropic Messages, each through
its official SDK, served by a transport that logs every request it serves
(``<pid> <provider> <turn>`` in ``served.txt``, the turn counting the
assistant messages in the request). OpenAI answers its first turn with a
recorded 429 and its second with text; Anthropic answers with a call of
``get_weather``. So the first round falls back to Anthropic, and the
second, after the tool ran, is OpenAI's.

In ``run`` mode the program prints ``answered <step key>`` once Anthropic's
reply is recorded and holds still there, before the engine runs the tool
and before the fallback's own step is recorded: the parent kills it then.
In ``recover`` mode it recovers the run and prints the answer.

    python fallback_agent_app.py STORE_URL WORKDIR run|recover RUN_ID
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import anthropic
import openai

import stalwart as sw
from stalwart import llm

PAYLOADS = Path(__file__).with_name("payloads")
QUESTION = "What's the weather in Paris?"
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


def _http_client(sdk: Any, provider: str, answers: dict[int, tuple[int, str]]) -> Any:
    base = importlib.import_module(f"{sdk.__name__}._base_client")
    http: Any = base.httpx2 if hasattr(base, "httpx2") else importlib.import_module("httpx")

    def serve(request: Any) -> Any:
        body = json.loads(request.read())
        turn = 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")
        _log("served.txt", f"{os.getpid()} {provider} {turn}")
        status, name = answers[turn]
        headers = {"content-type": "application/json", "x-request-id": f"req_{provider}_{turn}"}
        return http.Response(status, headers=headers, content=(PAYLOADS / name).read_bytes())

    return http.AsyncClient(transport=http.MockTransport(serve))


first = llm.openai(
    "gpt-4o",
    client=openai.AsyncOpenAI(
        api_key="test",
        max_retries=0,
        http_client=_http_client(
            openai, "openai", {1: (429, "openai_error_429.json"), 2: (200, "openai_chat_text.json")}
        ),
    ),
)
second = llm.anthropic(
    "claude-haiku-4-5",
    client=anthropic.AsyncAnthropic(
        api_key="test",
        max_retries=0,
        http_client=_http_client(anthropic, "anthropic", {1: (200, "anthropic_tool_use.json")}),
    ),
)
agent = llm.Agent(
    llm.fallback(first, second),
    instructions="Be brief.",
    tools=[get_weather],
    name="fallback_agent",
)


class Progress(sw.Hook):
    """Says when Anthropic's reply is recorded; in ``run`` mode, holds still there."""

    def __init__(self, hold: bool) -> None:
        self.hold = hold

    async def after_call(self, call: sw.CallInfo, result: Any) -> None:
        if call.name != second.name:
            return
        print(f"answered {call.key}", flush=True)
        if self.hold:
            await asyncio.sleep(3600)  # the parent kills us here


async def main() -> None:
    global WORKDIR
    url, workdir, action, run_id = sys.argv[1:5]
    WORKDIR = Path(workdir)
    hook = Progress(hold=action == "run")
    async with sw.Runner(url, hooks=[hook], policies=[agent], poll_interval=0.05) as runner:
        if action == "run":
            handle = await runner.start(agent, question=QUESTION, run_id=run_id)
        else:
            handles = await runner.recover()
            print(f"recovered {len(handles)}", flush=True)
            handle = sw.RunHandle(runner, run_id)
        answer = await handle.result(timeout=60)
    print("answer " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
