"""The agent under test: the demo's research agent (``stalwart.demo``).

``STALWART_DELIBERATE_CHANGE=1`` swaps in a changed version, as a code
change would: it offers the model its tools in another order, which changes
what every model step is called with. The replay suite must catch it.
"""

from __future__ import annotations

import os
from dataclasses import replace

import stalwart as sw
from stalwart.demo.agent import TOOLS, model, research

__all__ = ["AGENT"]


@sw.policy(name="research")
async def changed_research(ctx: sw.Context, question: str, max_rounds: int = 8) -> str:
    """The research agent after a careless edit: the tools are offered reversed."""
    conversation = [
        replace(
            sw.Message.system(
                "Answer from the release notes: search, read the best document, then answer."
            ),
            id=f"{ctx.run_id}:system",
        ),
        replace(sw.Message.user(question), id=f"{ctx.run_id}:question"),
    ]
    for _ in range(max_rounds):
        reply = await ctx.call(model, conversation, options=list(reversed(TOOLS)))
        conversation.extend(reply)
        if not any(m.is_action_call for m in reply):
            return "\n".join(m.text for m in reply if m.role == "assistant")
    raise RuntimeError(f"no answer after {max_rounds} turns")


AGENT = changed_research if os.environ.get("STALWART_DELIBERATE_CHANGE") else research
