"""A support agent whose risky tool calls wait for a person's approval.

    python examples/approvals.py
    python examples/approvals.py --store sqlite:///support.db

Refunds over 100 and every account closure need a person; looking an order
up does not. The model (scripted here, so that the example runs without a
key) asks, in one reply, to look an order up, refund 250 and close an
account. The run suspends before any of those calls runs, holding nothing
but a row, and shows up where people approve things (`stalwart runs
waiting`, the inspector's "Waiting for a human" page). A person decides
the calls one by one: the closure is denied with a reason, which the model
reads as that call's error; the refund is edited down to 100, and the
edited call runs. A second runner on the same store then reads the
finished run and its recorded decisions: nothing is asked again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart import Message
from stalwart.core.message import result_text
from stalwart.llm import Agent
from stalwart.testing import ScriptedLLM, call


@sw.policy(approval=lambda amount: amount > 100)
async def refund(order: str, amount: float) -> str:
    """Refund part or all of an order."""
    return f"refunded {amount:.2f} on {order}"


@sw.policy(approval=True)
async def close_account(customer: str) -> str:
    """Close a customer's account for good."""
    return f"closed the account of {customer}"


@sw.policy
async def look_up_order(order: str) -> str:
    """What an order is and what was paid."""
    return f"{order}: a kettle, paid 250.00"


def summary(observations: list[Message], options: Sequence[Any]) -> str:
    """The model's final answer: what each tool call came to."""
    return "; ".join(
        result_text(m.action_result) for m in observations if m.action_result is not None
    )


support = Agent(
    ScriptedLLM(
        [
            [
                call("look_up_order", _id="c1", order="A-17"),
                call("refund", _id="c2", order="A-17", amount=250.0),
                call("close_account", _id="c3", customer="ada"),
            ],
            summary,
        ],
        name="support_model",
    ),
    instructions="Help the customer; refunds and closures need a person's approval.",
    tools=[look_up_order, refund, close_account],
    name="support",
)


async def asked(runner: sw.Runner, run_id: str) -> tuple[str, dict[str, Any]]:
    """The approval the run waits for: its signal and the question, as a
    person sees it (what `stalwart runs waiting` lists)."""
    while True:
        run = await runner.get_run(run_id)
        if run.status == "suspended" and run.waiting_for:
            break
        await asyncio.sleep(0.02)
    for waiting in await runner.store.waiting_for_signals():
        if waiting.id == run_id:
            steps = await runner.steps(run_id)
            notes = [s for s in steps if s.name == "stalwart.ask" and s.output]
            note = json.loads(notes[-1].output or "{}")
            return run.waiting_for, note
    raise RuntimeError(f"run {run_id} is not among the runs waiting for a person")


async def main(store: str) -> None:
    async with sw.Runner(store, poll_interval=0.05) as runner:
        handle = await runner.start(support, question="Refund A-17 and close Ada's account")
        signal, note = await asked(runner, handle.run_id)
        print(f"waits for {signal}: {note['prompt']}")
        # One by one: deny the closure first; the run asks again for the refund.
        await runner.signal(
            handle.run_id,
            signal,
            {"c3": {"decision": "deny", "reason": "Ada has an open dispute"}},
        )
        signal, note = await asked(runner, handle.run_id)
        print(f"waits for {signal}: {note['prompt']}")
        await runner.signal(
            handle.run_id, signal, {"c2": {"decision": "edit", "arguments": {"amount": 100}}}
        )
        print(f"answer: {await handle.result(timeout=30)}")

    # Another process, later: the run's outcome and its decisions are in the ledger.
    async with sw.Runner(store) as reader:
        steps = await reader.steps(handle.run_id)
        decided = next(s for s in steps if s.name == "stalwart.approvals")
        print(f"decisions: {decided.output}")
        print(f"status: {(await reader.get_run(handle.run_id)).status}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="a store URL (default: a new SQLite file)")
    given = parser.parse_args().store
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(given or f"sqlite:///{Path(tmp) / 'support.db'}"))
