"""Policies whose runs the CLI tests create, inspect and resume.

They live at module level so that runs record them as "module:qualname" and
``stalwart runs resume`` can import them, as it would a user's application.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import stalwart as sw
from stalwart.testing import ScriptedLLM, call


@sw.policy
async def add(a: int, b: int) -> int:
    return a + b


@sw.policy
async def boom(x: int) -> int:
    raise ValueError(f"bad x {x}")


@sw.policy
async def failing(ctx: sw.Context) -> int:
    await add(1, 2)
    return await boom(3)


@sw.policy
async def approval(ctx: sw.Context, n: int) -> dict[str, Any]:
    first = await add(n, 1)
    got = await ctx.wait_for("approve")
    total = await add(first, int(got["k"]))
    return {"total": total, "approved": got}


@sw.policy
async def napper(ctx: sw.Context, seconds: float) -> int:
    a = await add(1, 1)
    await ctx.sleep(seconds)
    return await add(a, 1)


@sw.policy
async def grandchild(x: int) -> int:
    return x * 10


@sw.policy
async def child(ctx: sw.Context, x: int) -> int:
    return await grandchild(x) + 1


@sw.policy
async def nested(ctx: sw.Context) -> int:
    a = await child(1)
    b = await child(2)
    return a + b


@sw.policy
async def inner_wait(ctx: sw.Context) -> int:
    a = await grandchild(4)
    got = await ctx.wait_for("go")
    return a + int(got)


@sw.policy
async def outer_wait(ctx: sw.Context) -> int:
    return await inner_wait()


@sw.policy
async def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    if topic == "missing":
        raise KeyError("nothing about that")
    return f"{topic} is a snake"


def _answer(observations: list[sw.Message], options: Any) -> str:
    found = [m.text for m in observations if m.is_action_result and not m.is_error]
    return "Answer: " + "; ".join(found)


model = ScriptedLLM(
    [
        call("lookup", topic="python"),
        [call("lookup", topic="missing"), call("lookup", topic="cobra")],
        _answer,
    ],
    name="model",
)


@sw.policy
async def agent(ctx: sw.Context, question: str) -> list[sw.Message]:
    conversation = [replace(sw.Message.user(question), id="question")]
    for _ in range(5):
        reply = await ctx.call(model, conversation, options=[lookup])
        conversation.extend(
            replace(m, id=f"{m.action_result.call_id}:result") if m.action_result else m
            for m in reply
        )
        if not any(m.is_action_call for m in reply):
            break
    return conversation
