"""Policies the tracing tests run, in-process and in a subprocess that is killed."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import stalwart as sw
from stalwart.core.message import Message


@sw.policy
async def lookup(city: str) -> str:
    """Look up the weather of a city."""
    return f"sunny in {city}"


class Model:
    """A model policy whose reply carries what a provider records in meta."""

    name = "openai:gpt-test"

    async def __call__(
        self, ctx: sw.Context, observations: list[Message], options: Any = ()
    ) -> list[Message]:
        meta = {"usage": {"input_tokens": 12, "output_tokens": 5}, "model": "gpt-test"}
        meta["finish_reason"] = "tool_calls" if options else "stop"
        reply = Message.call("lookup", {"city": "Paris"}) if options else Message.assistant("done")
        return [
            Message(reply.role, reply.actor, reply.parts, reply.action_call, None, reply.id, meta)
        ]


model = sw.policy(Model(), name="openai:gpt-test")


@sw.policy
async def hang() -> str:
    """Stops forever where the crash test wants the process killed."""
    marker = os.environ.get("CRASH_MARKER")
    if marker:
        with open(marker, "w") as f:
            f.write("ready")
        await asyncio.sleep(3600)
    return "resumed"


@sw.policy
async def crashy(ctx: sw.Context, question: str) -> str:
    """A model call, then a step that hangs in the first process only."""
    reply = await ctx.call(model, observations=[Message.user(question)])
    return f"{reply[0].text} / {await ctx.call(hang)}"
