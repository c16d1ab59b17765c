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
import json
import os
import sys
from pathlib import Path
from typing import Any

import anthropic
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

QUESTION = "What's the weather in Paris?"


def _http_client(sdk: Any, provider: str, answers: dict[int, tuple[int, str]]) -> Any:
    def serve(http: Any, request: Any) -> Any:
        turn = assistant_turn(json.loads(request.read()))
        log("served.txt", f"{os.getpid()} {provider} {turn}")
        status, name = answers[turn]
        headers = {"content-type": "application/json", "x-request-id": f"req_{provider}_{turn}"}
        return http.Response(status, headers=headers, content=(PAYLOADS / name).read_bytes())

    return mock_http_client(sdk, serve)


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


async def main() -> None:
    url, _, action, run_id = program_args(4)
    # Says when Anthropic's reply is recorded; in ``run`` mode, holds still there.
    hook = HoldAfter(
        lambda call: call.name == second.name,
        lambda call: f"answered {call.key}",
        hold=action == "run",
    )
    async with sw.Runner(url, hooks=[hook], policies=[agent], poll_interval=0.05) as runner:
        handle = await run_or_recover(runner, action, run_id, agent, question=QUESTION)
        answer = await handle.result(timeout=60)
    print_answer(answer)


if __name__ == "__main__":
    asyncio.run(main())
