"""Long-term memory as two tools an agent can be given: ``remember`` and ``recall``.

    remember, recall = llm.memory_tools(("users", user_id))
    agent = llm.Agent(model, tools=[remember, recall])

The namespace is the program's, fixed when the tools are made: the model
writes notes and queries, never where they go, so one user's agent cannot
read another's memory. Each call is a tool step of the run and its memory
operation a step beneath it (``ctx.memory``): a resumed run replays both
without writing again. A note's key is derived from the run and the tool
step (stable across a resume), so a note written by a run that died before
its record is written again in place: one copy.
"""

from __future__ import annotations

from typing import Any

from ..core.context import Context
from ..core.memory import Embed, Memory, namespace_of
from ..core.policy import Policy, policy

__all__ = ["memory_tools"]


def memory_tools(
    namespace: Any, *, embed: Embed | None = None, limit: int = 5
) -> tuple[Policy[..., str], Policy[..., list[str]]]:
    """The tools ``remember(note)`` and ``recall(query)`` over ``namespace``
    (a string or a tuple of names), searching by vector with ``embed`` (an
    embedding model: text to a list of floats) or else by words; ``recall``
    returns at most ``limit`` notes, best first."""
    ns = namespace_of(namespace, "memory_tools")

    def memory(ctx: Context) -> Memory:
        return ctx.memory if embed is None else ctx.memory.with_embedder(embed)

    @policy(name="remember")
    async def remember(ctx: Context, note: str) -> str:
        """Keep a note in long-term memory, for this and later conversations.

        Args:
            note: What to remember, in one or two sentences.
        """
        await memory(ctx).put(ns, f"{ctx.run_id}/{ctx.step_key}", note)
        return "remembered"

    @policy(name="recall")
    async def recall(ctx: Context, query: str) -> list[str]:
        """Find notes kept in long-term memory that match a query.

        Args:
            query: What to look for, in a few words.
        """
        found = await memory(ctx).search(ns, query, limit=limit)
        return [str(item.value) for item in found]

    return remember, recall
