"""The agent the UI stream tests serve (``--app tests/api/ui_app.py:policies``):
a weather agent over OpenAI Chat Completions through the official SDK,
streaming, answered by recorded payloads (no live model). Its model asks for
the weather and the time at once; ``get_time`` needs a person's approval.

The replaying transport answers a request by what it holds: one whose last
message is a tool's result gets the streamed text reply, any other the
streamed tool calls. So every turn of a conversation asks, waits for the
approval, and answers.

Beside it: ``survey`` (a run waiting for a person), ``counting`` (a flow)
and ``support`` (the support journey of the examples, its model scripted).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai

import stalwart as sw
from stalwart import llm
from stalwart.conversations import conversation_policies
from stalwart.flow import Flow, Node
from stalwart.testing import ScriptedLLM

PAYLOADS = Path(__file__).resolve().parents[1] / "llm" / "payloads"
PACE = 0.03  # seconds between two events of a recorded stream


@sw.policy
async def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Current weather in a city.

    Args:
        city: City name, e.g. Paris
        unit: Temperature unit, celsius or fahrenheit.
    """
    return {"temperature": 18, "unit": unit, "sky": "partly cloudy"}


@sw.policy(approval=True)
async def get_time(timezone: str) -> str:
    """Current local time in a time zone.

    Args:
        timezone: An IANA time zone, e.g. Europe/Paris
    """
    return "14:05"


async def _paced(payload: bytes) -> AsyncIterator[bytes]:
    """The recorded stream an event at a time, as a model sends its tokens."""
    for event in payload.split(b"\n\n"):
        if event.strip():
            await asyncio.sleep(PACE)
            yield event + b"\n\n"


def _client() -> openai.AsyncOpenAI:
    base = importlib.import_module("openai._base_client")
    http: Any = base.httpx2 if hasattr(base, "httpx2") else importlib.import_module("httpx")
    calls = (PAYLOADS / "openai_chat_stream_tool_calls.sse").read_bytes()
    text = (PAYLOADS / "openai_chat_stream_text.sse").read_bytes()

    async def serve(request: Any) -> Any:
        body = json.loads(await request.aread())
        answered = body["messages"][-1]["role"] == "tool"
        headers = {"content-type": "text/event-stream"}
        return http.Response(200, headers=headers, content=_paced(text if answered else calls))

    transport = http.MockTransport(serve)
    return openai.AsyncOpenAI(
        api_key="test", max_retries=0, http_client=http.AsyncClient(transport=transport)
    )


model = llm.openai("gpt-4o", client=_client(), stream=True)
weather = llm.Agent(model, instructions="Be brief.", tools=[get_weather, get_time], name="weather")


@sw.policy
async def survey(ctx: sw.Context) -> str:
    """Ask a person for a city, step by step, as a journey does."""
    ctx.emit({"survey": "started"})
    city = await ctx.wait_for("answer", prompt="Which city?", about={"step": "city"})
    return f"noted {city}"


class Count(Node):
    """Counts to three, one visit a number: a loop through the graph."""

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> str:
        seen = [*shared["seen"], len(shared["seen"]) + 1]
        shared["seen"] = seen
        shared["totals/by~kind"] = {"odd": sum(n % 2 for n in seen), "all": len(seen)}
        return "again" if len(seen) < 3 else "done"


class Tidy(Node):
    """Drops the scratch key and says it is done."""

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
        del shared["scratch"]
        shared["done"] = True


_count, _tidy = Count(), Tidy()
_count - "again" >> _count
_count - "done" >> _tidy
#: A flow whose node loops, writes nested values and a key JSON Pointer
#: must escape, and removes a key.
counting = Flow(start=_count)
counting.name = "counting"


def _support() -> Any:
    """The support journey of ``examples/support_journey.py``, its scripted model."""
    path = Path(__file__).resolve().parents[2] / "examples" / "support_journey.py"
    spec = importlib.util.spec_from_file_location("examples_support_journey", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.support_journey(ScriptedLLM(module.SCRIPT))


support = _support()

#: What ``stalwart serve --execute`` serves: the agent, and its conversations.
policies = [weather, *conversation_policies(weather), survey, counting, support]
