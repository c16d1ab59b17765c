"""The tools the recorded payloads call, as real policies, and helpers to run a model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message

from .conftest import Replay

# Executions of the tools, in order: (name, arguments). Tests clear it.
RAN: list[tuple[str, dict[str, Any]]] = []


@sw.policy
async def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Current weather in a city.

    Args:
        city: City name, e.g. Paris
        unit: Temperature unit, celsius or fahrenheit.
    """
    RAN.append(("get_weather", {"city": city, "unit": unit}))
    return {"temperature": 18, "unit": unit, "sky": "partly cloudy"}


@sw.policy
async def get_time(timezone: str) -> str:
    """Current local time in a time zone.

    Args:
        timezone: An IANA time zone, e.g. Europe/Paris
    """
    RAN.append(("get_time", {"timezone": timezone}))
    return "14:05"


TOOLS = [get_weather, get_time]

KINDS = ["chat", "responses", "anthropic"]
MODELS = {"chat": "gpt-4o", "responses": "gpt-4.1", "anthropic": "claude-haiku-4-5"}
PREFIX = {"chat": "openai_chat", "responses": "openai_responses", "anthropic": "anthropic"}


def payload_for(kind: str, what: str) -> str:
    """The recorded payload of ``what`` (text, tool_call...) for a kind of API."""
    if kind == "anthropic" and what in ("tool_call", "parallel_tool_calls", "stream_tool_calls"):
        what = {
            "tool_call": "tool_use",
            "parallel_tool_calls": "parallel_tool_use",
            "stream_tool_calls": "stream_tool_use",
        }[what]
    ext = ".sse" if what.startswith("stream") else ".json"
    return f"{PREFIX[kind]}_{what}{ext}"


def make_model(kind: str, r: Replay, *, retries: int = 0, **options: Any) -> llm.Provider:
    """A provider policy of ``kind`` whose SDK client is served by ``r``."""
    if kind == "anthropic":
        return llm.anthropic(MODELS[kind], client=r.anthropic(max_retries=retries), **options)
    api = "chat" if kind == "chat" else "responses"
    return llm.openai(MODELS[kind], api=api, client=r.openai(max_retries=retries), **options)


async def ask(
    model: Any,
    history: Sequence[Message],
    options: Sequence[Any] = (),
    *,
    runner: sw.Runner | None = None,
    rounds: int = 1,
) -> list[Message]:
    """Run ``rounds`` model calls in one run, as an agent loop would; return what they added."""

    @sw.policy
    async def converse(ctx: sw.Context) -> list[Message]:
        messages = list(history)
        for _ in range(rounds):
            messages += await ctx.call(model, observations=messages, options=list(options))
        return messages[len(history) :]

    result: list[Message] = await (runner or sw.Runner()).run(converse)
    return result


def only(messages: Sequence[Message], keep: Callable[[Message], bool]) -> list[Message]:
    return [m for m in messages if keep(m)]
