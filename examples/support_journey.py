"""A support journey: identify, diagnose, resolve, confirm. Offline, durable.

A customer whose internet keeps dropping talks to a support agent that
follows a process. Each step has its own instructions (rendered from the
ticket, the journey's typed state) and its own tools; a tool records what it
learns in the ticket and moves the journey on, and the next model call, in
the same turn, already sees the next step. The conversation is one durable
run on SQLite: between the customer's messages it waits, holding nothing
(``runner.signal(run_id, "message", text)`` wakes it), and every change of
step is a recorded step whose output is the ticket.

The model is a ``ScriptedLLM`` playing the replies a real model would give,
so the example runs without an API key: pass any model (``llm.model(...)``)
to :func:`support_journey` for the real thing.

    python examples/support_journey.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import stalwart as sw
from stalwart.journey import Journey, JourneyReply, Step, ToolContext
from stalwart.testing import Reply, ScriptedLLM, call


class Stage(Enum):
    IDENTIFY = "identify"
    DIAGNOSE = "diagnose"
    RESOLVE = "resolve"
    CONFIRM = "confirm"


class Ticket(BaseModel):
    customer: str = ""
    problem: str = ""
    fix: str = ""
    resolved: bool = False


# -- tools -------------------------------------------------------------------------------
async def identify(ctx: ToolContext, email: str) -> str:
    """Record who the customer is, once they have said it.

    Args:
        email: The customer's email address.
    """
    ctx.state.customer = email
    ctx.goto(Stage.DIAGNOSE)
    return f"customer {email} identified"


async def line_test(email: str) -> dict[str, Any]:
    """Test the customer's line from the exchange.

    Args:
        email: The customer's email address.
    """
    return {"sync": "stable", "noise_margin_db": 9.5, "router_firmware": "1.0.2"}


async def diagnose(ctx: ToolContext, problem: str) -> str:
    """Record the cause of the problem, once found.

    Args:
        problem: What is wrong, in a sentence.
    """
    ctx.state.problem = problem
    ctx.goto(Stage.RESOLVE)
    return "diagnosis recorded"


async def push_firmware(ctx: ToolContext, version: str) -> str:
    """Update the customer's router to a firmware version (the customer must agree first).

    Args:
        version: The firmware version to install.
    """
    ctx.state.fix = f"router firmware updated to {version}"
    ctx.goto(Stage.CONFIRM)
    return f"router updated to {version}; it restarts in a minute"


async def close_ticket(ctx: ToolContext, resolved: bool) -> str:
    """Close the ticket once the customer has said whether the fix worked.

    Args:
        resolved: Whether the customer confirmed the problem is gone.
    """
    ctx.state.resolved = resolved
    ctx.finish()
    return "ticket closed"


STEPS = {
    Stage.IDENTIFY: Step(
        "Greet the customer and find out who they are (their email).", tools=[identify]
    ),
    Stage.DIAGNOSE: Step(
        "The customer is {customer}. Find the cause of their problem: test their line, "
        "then record the diagnosis.",
        tools=[line_test, diagnose],
        moves=[Stage.RESOLVE],
    ),
    Stage.RESOLVE: Step(
        "The problem: {problem}. Propose the fix, and apply it once {customer} agrees.",
        tools=[push_firmware],
        moves=[Stage.CONFIRM],
    ),
    Stage.CONFIRM: Step(
        "Done: {fix}. Ask {customer} whether the problem is gone, then close the ticket.",
        tools=[close_ticket],
    ),
}


def support_journey(model: Any) -> Journey[Stage, Ticket]:
    """The support journey, with any model."""
    return Journey(
        model,
        steps=STEPS,
        state=Ticket,
        start=Stage.IDENTIFY,
        instructions="You are the support agent of an internet provider. Be brief and kind.",
        name="support",
        max_rounds=6,
    )


# What a model would answer, message by message (the scripted model finds its
# place from the conversation, so a resumed run gets the next one).
SCRIPT: list[Reply] = [
    # "Hi, my internet keeps dropping. I'm ada@example.com": one message, three steps.
    call("identify", email="ada@example.com"),
    call("line_test", email="ada@example.com"),
    call("diagnose", problem="the router's firmware 1.0.2 drops the line"),
    "Your line is fine, but your router's firmware (1.0.2) is known to drop the "
    "connection. Shall I update it to 1.0.7?",
    # "Yes please."
    call("push_firmware", version="1.0.7"),
    "Your router is updating and restarts in a minute. Is your connection stable now?",
    # "Yes, all good now."
    call("close_ticket", resolved=True),
    "Glad to hear it. Your ticket is closed; have a good day!",
]

MESSAGES = [
    "Hi, my internet keeps dropping. I'm ada@example.com",
    "Yes please.",
    "Yes, all good now.",
]


async def converse(url: str, journey: Journey[Stage, Ticket], run_id: str) -> JourneyReply:
    """Hold the conversation as one durable run: start it, answer each reply."""
    async with sw.Runner(url, policies=[journey], poll_interval=0.02) as runner:
        handle = await runner.start(journey, message=MESSAGES[0], run_id=run_id)
        print(f"customer: {MESSAGES[0]}")
        for n, text in enumerate(MESSAGES[1:], 1):
            print(f"support:  {await waiting_reply(runner, run_id, n)}")
            print(f"customer: {text}")
            await runner.signal(run_id, "message", text)
        reply: JourneyReply = await handle.result(timeout=30)
        print(f"support:  {reply.text}")
        for step in await runner.steps(run_id):
            if step.name == "stalwart.journey":
                print(f"  step {step.key}: {step.output}")
        return reply


async def waiting_reply(runner: sw.Runner, run_id: str, n: int) -> str:
    """The journey's ``n``-th reply, once the run waits for the answer to it.

    Each wait records what it asks (the reply) as a ``stalwart.ask`` step;
    counting them tells this wait from the previous one, which a run just
    signalled may still show as suspended.
    """
    while True:
        run = await runner.get_run(run_id)
        if run.status in ("failed", "cancelled", "succeeded"):
            raise RuntimeError(f"run {run_id} ended ({run.status}) before reply {n}: {run.error}")
        if run.status == "suspended":
            steps = await runner.steps(run_id)
            asked = sorted(
                (s for s in steps if s.name == "stalwart.ask" and s.output),
                key=lambda s: s.finished_at,
            )
            if len(asked) >= n:
                return str(json.loads(asked[n - 1].output or "{}")["prompt"])
        await asyncio.sleep(0.01)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        journey = support_journey(ScriptedLLM(SCRIPT))
        reply = await converse(f"sqlite:///{Path(tmp) / 'support.db'}", journey, "ticket-1")
        ticket = journey.state_of(reply)
        print(f"ticket: {ticket.model_dump()}; tokens: {reply.total_usage}")


if __name__ == "__main__":
    asyncio.run(main())
