"""A chat page written with the AI SDK, over a durable agent.

Serve it (one process that also executes the conversations; the page at /):

    cd examples/aisdk_chat && npm ci && npm run build && cd ../..
    stalwart serve --app examples/aisdk_chat/app.py:policies --store sqlite:///chat.db \\
        --static examples/aisdk_chat/static --execute --no-auth

then open http://127.0.0.1:8000/. The page (``page.js``, bundled into
``static/chat.js``) sends each message with the AI SDK's
``DefaultChatTransport`` to ``POST /agents/support/aisdk`` and builds the
reply with ``readUIMessageStream``, as ``useChat`` does. A refund waits for
your approval: the page shows Approve and Deny, and sends the answer back
the way ``addToolApprovalResponse`` does. Every turn is a durable run: a
page reloaded or a server restarted mid-turn loses nothing
(``resumeStream``: ``GET /agents/support/aisdk/{id}/stream``).

The model is a small rule-based one, so the example runs offline; give the
``Agent`` an ``llm.openai(..., stream=True)`` to talk to a real one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.conversations import conversation_policies
from stalwart.llm import Agent
from stalwart.testing import ScriptedLLM, call


@sw.policy(approval=True)
async def refund(order: str, amount: float) -> str:
    """Refund part or all of an order.

    Args:
        order: The order's number, e.g. A-17.
        amount: How much to refund.
    """
    return f"refunded {amount:.2f} on {order}"


def reply(observations: list[sw.Message], options: Sequence[Any]) -> str | sw.Message:
    """Refund the order a message names; say what came of it; else ask."""
    last = observations[-1]
    if last.action_result is not None:
        result = last.action_result
        if result.error_type is not None:
            return f"I did not refund it: {result.error_message}"
        return f"Done: {result.value}."
    order = re.search(r"\b[A-Z]-[0-9]+\b", last.text)
    if order is None:
        return "Which order shall I refund? (e.g. A-17)"
    return call("refund", order=order.group(), amount=20.0)


support = Agent(
    ScriptedLLM([reply] * 1000, name="rules"),
    instructions="Help the customer with refunds.",
    tools=[refund],
    name="support",
)

#: What ``stalwart serve --execute`` serves: the agent and its conversations.
policies = [support, *conversation_policies(support)]
