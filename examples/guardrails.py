"""A support agent behind guardrails: on its question, its tool calls and its answer.

Run it (no API key): ``python examples/guardrails.py [--store sqlite:///guardrails.db]``

What it shows:
- an input guardrail that is a plain function (no card numbers reach the
  agent), a tool guardrail (no refund above a limit runs), and an output
  guardrail that is itself an agent on a model, answering with a ``Verdict``;
- a trip ends the answer with ``llm.GuardrailTripped``, naming the
  guardrail, the stage and the reason; the tool it stopped never runs;
- every verdict is a step of the run, and a tripped run read back by another
  runner ends the same way, without checking again.

The models are scripted, so it runs offline; with a key, put
``llm.model("openai:gpt-4.1-mini")`` in their place.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.testing import ScriptedLLM, call

CARD = re.compile(r"\b(?:\d[ -]?){13,16}\b")
REFUND_LIMIT = 100.0
REFUNDED: list[float] = []


@sw.policy
async def refund(order: str, amount: float) -> str:
    """Refund part or all of an order to the customer's card.

    Args:
        order: The order number, e.g. A-17.
        amount: How much, in euros.
    """
    REFUNDED.append(amount)
    return f"refunded {amount:.2f} EUR on {order}"


@sw.policy
async def no_card_numbers(messages: list[sw.Message]) -> llm.Verdict:
    """Input guardrail: a card number never reaches the model."""
    if any(CARD.search(m.text) for m in messages):
        return llm.Verdict.trip("the question holds a card number")
    return llm.Verdict.ok()


@sw.policy
async def refund_limit(messages: list[sw.Message]) -> llm.Verdict:
    """Tool guardrail: a refund above the limit is for a person to make."""
    for m in messages:
        c = m.action_call
        if c is not None and c.name == "refund" and float(c.arguments["amount"]) > REFUND_LIMIT:
            return llm.Verdict.trip(f"a refund above {REFUND_LIMIT:.0f} EUR needs a person")
    return llm.Verdict.ok()


def support_model() -> ScriptedLLM:
    """The support agent's model: refunds what the customer asks for, then says so."""

    def reply(observations: list[sw.Message], options: Sequence[Any]) -> Any:
        last = observations[-1]
        if last.action_result is not None:
            return f"Done: {last.action_result.value}."
        if "tomorrow" in last.text:
            return "I guarantee it will be on your card tomorrow."
        amount = re.search(r"(\d+(?:\.\d+)?) ?EUR", last.text)
        if amount is None:
            return "How much should I refund, and on which order?"
        return call("refund", order="A-17", amount=float(amount.group(1)))

    return ScriptedLLM([reply, reply], name="support_llm")


def tone_judge() -> llm.Agent:
    """Output guardrail, on a model: is the answer polite and free of promises?"""

    def judge(observations: list[sw.Message], options: Sequence[Any]) -> str:
        text = observations[-1].text.lower()
        tripped = "guarantee" in text
        reason = "the answer promises something" if tripped else ""
        return json.dumps({"tripped": tripped, "reason": reason})

    return llm.Agent(
        ScriptedLLM([judge], name="judge_llm"),
        instructions="You check a support agent's answer. Trip it if it promises anything.",
        name="tone_judge",
        output_type=llm.Verdict,
    )


def support_agent() -> llm.Agent:
    return llm.Agent(
        support_model(),
        instructions="You handle refunds for order A-17.",
        tools=[refund],
        name="support",
        input_guardrails=[no_card_numbers],
        tool_guardrails=[refund_limit],
        output_guardrails=[tone_judge()],
    )


QUESTIONS = {
    "small": "Please refund 30 EUR on my order.",
    "card": "Refund 30 EUR to card 4111 1111 1111 1111.",
    "large": "Please refund 450 EUR on my order.",
    "when": "Will my refund be there tomorrow?",
}


async def ask(runner: sw.Runner, agent: llm.Agent, run_id: str) -> str:
    try:
        answer = await agent.run(QUESTIONS[run_id], runner=runner, run_id=run_id)
        return f"{run_id}: {answer}"
    except llm.GuardrailTripped as trip:
        return f"{run_id}: stopped by {trip.guardrail} ({trip.stage}): {trip.reason}"


async def main(store: str) -> None:
    agent = support_agent()
    async with sw.Runner(store) as runner:
        for run_id in QUESTIONS:
            print(await ask(runner, agent, run_id))
        steps = sorted(await runner.steps("large"), key=lambda s: s.key)
        print("steps of 'large':", ", ".join(f"{s.key} {s.name}" for s in steps))
    print("refunds made:", REFUNDED)
    # Another runner reads the tripped run's outcome from the ledger: the same trip.
    async with sw.Runner(store, serving=False) as runner:
        try:
            await sw.RunHandle(runner, "large").result(timeout=10)
        except llm.GuardrailTripped as trip:
            print(f"read back: {trip.guardrail}: {trip.reason}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="a store URL (default: a new SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(args.store or f"sqlite:///{Path(tmp) / 'guardrails.db'}"))
