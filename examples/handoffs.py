"""Handoffs: a support desk where triage hands the conversation to billing or refunds.

The triage agent answers general questions and hands the conversation over
when it is about an invoice (to ``billing``) or a refund (to ``refunds``,
which is passed the conversation without tool calls). The agent that
receives the conversation answers the question and owns the following
turns, until it hands back to triage. The conversation lives in the ledger:
each handoff is a recorded step (``stalwart.handoff:triage>billing``), so a
desk restarted with the same ``--store`` and ``--conversation`` goes on with
the agent that last received it. It runs with OPENAI_API_KEY or
ANTHROPIC_API_KEY set (without one it says how to set one):

    export OPENAI_API_KEY=sk-...
    python examples/handoffs.py "What is the total of invoice INV-7?" "Thanks, anything else?"
    python examples/handoffs.py --store sqlite:///desk.db --conversation ada "Hello"
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import llm

INVOICES = {"INV-7": {"total_eur": 129.0, "status": "paid", "paid_on": "2026-05-03"}}

NO_KEY = """\
This example calls a real model, and no API key is set. Set one of:

    export OPENAI_API_KEY=sk-...         # uses openai:gpt-4.1-mini
    export ANTHROPIC_API_KEY=sk-ant-...  # uses anthropic:claude-haiku-4-5

then run it again (or pick a model with --model provider:model)."""


@sw.policy
async def invoice(number: str) -> dict[str, Any]:
    """An invoice's total, status and payment date.

    Args:
        number: The invoice number, e.g. INV-7.
    """
    found = INVOICES.get(number.strip().upper())
    if found is None:
        raise LookupError(f"no invoice {number}; known: {', '.join(INVOICES)}")
    return found


def build_desk(model: Any, *, billing_model: Any = None, refunds_model: Any = None) -> llm.Agent:
    """The triage agent on ``model``, with billing and refunds (on ``model`` too
    unless given their own) to hand the conversation to."""
    billing = llm.Agent(
        billing_model if billing_model is not None else model,
        name="billing",
        instructions=(
            "You answer questions about invoices with the invoice tool, in one or two "
            "sentences. When the customer asks about something other than invoices, "
            "hand the conversation back to triage."
        ),
        tools=[invoice],
        handoffs=["triage"],
    )
    refunds = llm.Agent(
        refunds_model if refunds_model is not None else model,
        name="refunds",
        instructions=(
            "You handle refund requests: say what happens next in two sentences. "
            "For anything else, hand the conversation back to triage."
        ),
        handoffs=["triage"],
    )
    return llm.Agent(
        model,
        name="triage",
        instructions=(
            "You are the first contact of a support desk. Hand the conversation to billing "
            "for invoices and to refunds for refunds; answer anything else briefly yourself."
        ),
        handoffs=[billing, llm.Handoff(refunds, history="without_tools")],
    )


async def converse(
    desk: llm.Agent,
    messages: Sequence[str],
    *,
    store: str | None = None,
    conversation: str = "desk",
) -> list[str]:
    """The desk's reply to each message, in one conversation (durable with ``store``)."""
    replies: list[str] = []
    async with sw.Runner(store, poll_interval=0.05) as runner:
        chat = sw.Conversation(runner, desk, conversation)
        for message in messages:
            replies.append(str(await chat.send(message)))
    return replies


def model_from_env(choice: str | None = None) -> Any | None:
    """The model to use: ``choice``, else one whose API key is set, else None."""
    if choice:
        return llm.model(choice)
    if os.environ.get("OPENAI_API_KEY"):
        return llm.openai("gpt-4.1-mini")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return llm.anthropic("claude-haiku-4-5")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A support desk whose agents hand off.")
    parser.add_argument(
        "messages",
        nargs="*",
        default=["What is the total of invoice INV-7?", "When was it paid?"],
    )
    parser.add_argument("--model", help="provider:model, e.g. openai:gpt-4.1-mini")
    parser.add_argument("--store", help="keep the conversation, e.g. sqlite:///desk.db")
    parser.add_argument("--conversation", default="desk", help="the conversation's id")
    args = parser.parse_args(argv)
    try:
        model = model_from_env(args.model)
    except llm.MissingAPIKey as exc:
        print(f"{exc}\n\n{NO_KEY}")
        return 0
    if model is None:
        print(NO_KEY)
        return 0
    replies = converse(
        build_desk(model), args.messages, store=args.store, conversation=args.conversation
    )
    for message, reply in zip(args.messages, asyncio.run(replies), strict=True):
        print(f"> {message}\n{reply}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
