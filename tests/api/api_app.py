"""The policies the API tests serve (``--app tests/api/api_app.py:policies``)
and execute (a worker with ``--app tests/api/api_app.py``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import stalwart as sw
from stalwart.conversations import conversation_policies


@sw.policy
async def greet(name: str, times: int = 1) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
        times: How many times.
    """
    return " ".join([f"hello {name}"] * times)


@sw.policy
async def echo(i: int) -> int:
    return i


@sw.policy
async def stepper(ctx: sw.Context, n: int) -> int:
    """``n`` steps, each one after a ``go`` signal: a test decides when each
    happens, so a stream can be cut and resumed between any two."""
    total = 0
    for i in range(n):
        await ctx.wait_for("go")
        total += await echo(i)
    return total


@sw.policy
async def approval(ctx: sw.Context, order: str) -> str:
    """Wait for a human's decision on ``order``."""
    decision = await ctx.wait_for("approve", prompt=f"ship {order}?")
    return f"{order}: {'shipped' if decision.get('ok') else 'held'}"


policies = [greet, stepper, approval]


@sw.policy
async def parrot(question: str, history: list[sw.Message] | None = None) -> str:
    """Repeat the message, counting the turns before it (a conversation's agent)."""
    return f"{question} (after {len(history or []) // 2} turns)"


conversational = [*policies, parrot]

#: A worker for the conversations (``--app tests/api/api_app.py:conversation_worker``):
#: the conversation's loop and the turn besides the agent; the API serves
#: ``conversational`` only, so neither can be started over HTTP.
conversation_worker = [*conversational, *conversation_policies(parrot)]


@sw.policy
async def repeat(word: str, times: Annotated[int, Field(ge=0, le=100)] = 1) -> str:
    """Say ``word`` ``times`` times: a bounded cost, whatever a client sends."""
    return " ".join([word] * times)


#: What a generator of requests may start, any number of times, with any
#: inputs the document allows (``--app tests/api/api_app.py:contract``): each
#: policy's cost is bounded by its inputs' schema (``greet`` would build a
#: string of ``times`` copies, for any ``times``).
contract = [repeat, stepper, approval, parrot]
