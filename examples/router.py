"""A front desk that routes each customer to billing or support. Offline, durable.

A :class:`~stalwart.journey.Router` offers its model one tool per route; the
model calls the one that fits and the router starts it, as a step of the same
durable run. Two conversations, on one SQLite file:

* "I was charged twice..." goes to **billing**, an agent whose tools move
  money. Its ``refund`` tool is ``exclusive``: the model asks for two refunds
  at once, and Stalwart runs them one after the other. The customer's
  account is set by the program with ``functools.partial(refund,
  account_id=...)``: the model is not shown that argument and cannot give it.
* "hello" is unclear, so the desk asks what it is about, the run waits for
  the answer (holding nothing), and "my internet keeps dropping" goes to
  **support**, a journey.

The models are heuristic stand-ins (``ScriptedLLM``), so no key is needed.

    python examples/router.py
"""

from __future__ import annotations

import asyncio
import functools
import json
import tempfile
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import stalwart as sw
from stalwart import llm
from stalwart.journey import Journey, Route, Router, Step, ToolContext
from stalwart.testing import ScriptedLLM, call

LEDGER: list[str] = []  # what the tools did, in order (a bank's ledger, in memory)


# -- billing: an agent with money-moving tools ------------------------------------------
@sw.policy(exclusive=True)
async def refund(account_id: int, amount: float, reason: str) -> str:
    """Refund an amount to the customer's card.

    Args:
        account_id: The customer's account (set by the program).
        amount: How much to refund, in euros.
        reason: Why, in a few words.
    """
    LEDGER.append(f"refund start {amount}")
    await asyncio.sleep(0)  # a bank call: other calls could run meanwhile
    LEDGER.append(f"refund end {amount}")
    return f"refunded {amount:.2f} EUR to account {account_id} ({reason})"


@sw.policy
async def invoices(account_id: int) -> list[dict[str, Any]]:
    """The customer's recent invoices.

    Args:
        account_id: The customer's account (set by the program).
    """
    return [
        {"month": "March", "amount": 30.0, "paid": 2},
        {"month": "April", "amount": 30.0, "paid": 2},
    ]


def billing_agent(account_id: int) -> llm.Agent:
    """The billing agent of the signed-in customer: its tools act on that account only."""
    model = ScriptedLLM(
        [
            call("invoices"),
            [  # two refunds in one round: run one at a time, since refund is exclusive
                call("refund", amount=30.0, reason="March charged twice"),
                call("refund", amount=30.0, reason="April charged twice"),
            ],
            "You were charged twice in March and April; I refunded both, 60 EUR in all.",
        ],
        name="billing_model",
    )
    return llm.Agent(
        model,
        name="billing",
        instructions="You handle billing questions: charges, invoices, refunds.",
        tools=[
            functools.partial(invoices, account_id=account_id),
            functools.partial(refund, account_id=account_id),
        ],
    )


# -- support: a one-step journey -----------------------------------------------------------
class Desk(Enum):
    HELP = "help"


class Ticket(BaseModel):
    problem: str = ""


async def open_ticket(ctx: ToolContext, problem: str) -> str:
    """Open a ticket for a technical problem.

    Args:
        problem: What is wrong, in a sentence.
    """
    ctx.state.problem = problem
    ctx.finish()
    return "ticket T-1 opened"


support = Journey(
    ScriptedLLM(
        [call("open_ticket", problem="the line drops"), "I opened ticket T-1 for you."],
        name="support_model",
    ),
    steps={Desk.HELP: Step("Help with technical problems.", tools=[open_ticket])},
    state=Ticket,
    start=Desk.HELP,
    name="support",
    instructions="You handle technical problems: internet, devices.",
)


# -- the desk -----------------------------------------------------------------------------
def choose(observations: list[sw.Message], options: Sequence[Any]) -> sw.Message | str:
    """A heuristic router model: keywords of the user's last message."""
    said = next(m.text for m in reversed(observations) if m.role == "user").lower()
    if "charge" in said or "invoice" in said:
        return call("route_to_billing")
    if "internet" in said or "line" in said:
        return call("route_to_support")
    return "What can I help you with: a bill, or a technical problem?"


def front_desk(account_id: int) -> Router:
    """The desk of the signed-in customer."""
    return Router(
        ScriptedLLM([choose, choose, choose], name="desk_model"),
        routes=[
            Route(billing_agent(account_id), "Charges, invoices and refunds."),
            Route(support, "Technical problems: internet, devices."),
        ],
        instructions="You are the front desk of an internet provider.",
        name="desk",
    )


async def asked(runner: sw.Runner, run_id: str) -> str:
    """What the desk asks, once the run is suspended waiting for the answer
    (each wait records its question as a ``stalwart.ask`` step)."""
    while True:
        run = await runner.get_run(run_id)
        if run.status in ("failed", "cancelled", "succeeded"):
            raise RuntimeError(f"run {run_id} ended ({run.status}) before asking: {run.error}")
        if run.status == "suspended":
            [ask] = [s for s in await runner.steps(run_id) if s.name == "stalwart.ask"]
            return str(json.loads(ask.output or "{}")["prompt"])
        await asyncio.sleep(0.01)  # the run is in another task: look again


async def main(url: str) -> dict[str, Any]:
    desk = front_desk(account_id=7)
    async with sw.Runner(url, policies=[desk], poll_interval=0.02) as runner:
        print("customer: I was charged twice, can you check my invoices?")
        billing = await runner.run(
            desk, message="I was charged twice, can you check my invoices?", run_id="c-1"
        )
        print(f"desk:     {billing}")
        print("  tools:  " + "; ".join(LEDGER))

        print("customer: hello")
        handle = await runner.start(desk, message="hello", run_id="c-2")
        print(f"desk:     {await asked(runner, 'c-2')}")
        print("customer: my internet keeps dropping")
        await runner.signal("c-2", "message", "my internet keeps dropping")
        reply = await handle.result(timeout=30)
        print(f"desk:     {reply.text} (ticket: {reply.state})")
        steps = [s.name for s in await runner.steps("c-2")]
        print(f"  steps:  {', '.join(steps)}")
    return {"billing": billing, "support": reply.text, "ledger": list(LEDGER)}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(f"sqlite:///{Path(tmp) / 'desk.db'}"))
