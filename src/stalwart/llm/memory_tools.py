"""Long-term memory as two tools an agent can be given: ``remember`` and ``recall``.

    agent = llm.Agent(model, tools=[llm.remember, llm.recall], name="assistant")

    @sw.policy
    async def converse(user: str, question: str) -> str:
        with llm.memory_scope(("users", user)):
            return await agent(question=question)

The namespace is the program's, set around the agent's call from the run's
own data (its inputs), never by the model: the tools' schemas hold a note
and a query only, so one user's agent cannot reach another's memory. The
tools are one pair of policies for every user, so a worker registers them
once and serves everyone. The scope is a context variable: the engine runs
the tool calls in tasks started inside the agent's call, which inherit it,
and a resumed run sets it again as it replays the code around the call.

Each call is a tool step of the run and its memory operation a step beneath
it (``ctx.memory``): a resumed run replays both without writing again. A
note's key is derived from the run and the tool's step (stable across a
resume), so a note written by a run that died before its record is written
again in place: one copy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..core.context import Context
from ..core.memory import Embed, Memory, namespace_of
from ..core.policy import policy

__all__ = ["RECALL_LIMIT", "memory_scope", "recall", "remember"]

#: How many notes ``recall`` returns at most, best first.
RECALL_LIMIT = 5


@dataclass(frozen=True, slots=True)
class _Scope:
    namespace: tuple[str, ...]
    embed: Embed | None


_SCOPE: ContextVar[_Scope | None] = ContextVar("stalwart_memory_scope", default=None)


@contextlib.contextmanager
def memory_scope(namespace: Any, *, embed: Embed | None = None) -> Iterator[None]:
    """Inside this block, ``remember`` and ``recall`` work on ``namespace``
    (a string or a tuple of names), by vector with ``embed`` (an embedding
    model: text to a list of floats, sync or async), else by words. Set it
    from the run's inputs, so that a resumed run sets the same one."""
    token = _SCOPE.set(_Scope(namespace_of(namespace, "memory_scope"), embed))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _scoped(ctx: Context, tool: str) -> tuple[Memory, tuple[str, ...]]:
    found = _SCOPE.get()
    if found is None:
        raise LookupError(
            f"run {ctx.run_id!r}, step {ctx.step_key}: tool {tool!r} has no memory "
            "namespace: call the agent inside `with llm.memory_scope(namespace):`"
        )
    memory = ctx.memory if found.embed is None else ctx.memory.with_embedder(found.embed)
    return memory, found.namespace


@policy
async def remember(ctx: Context, note: str) -> str:
    """Keep a note in long-term memory, for this and later conversations.

    Args:
        note: What to remember, in one or two sentences.
    """
    memory, namespace = _scoped(ctx, "remember")
    await memory.put(namespace, f"{ctx.run_id}/{ctx.step_key}", note)
    return "remembered"


@policy
async def recall(ctx: Context, query: str) -> list[str]:
    """Find notes kept in long-term memory that match a query.

    Args:
        query: What to look for, in a few words.
    """
    memory, namespace = _scoped(ctx, "recall")
    found = await memory.search(namespace, query, limit=RECALL_LIMIT)
    return [str(item.value) for item in found]
