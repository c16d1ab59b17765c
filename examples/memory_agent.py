"""An assistant that remembers what a user tells it, across conversations.

Each conversation is a run of its own; what the agent keeps with its
``remember`` tool lives in the store beside the ledger, under the user's
namespace, so the next conversation finds it with ``recall``. The "model" is
a heuristic written with ``ScriptedLLM`` (no API key needed): a sentence
starting with "remember" is kept, anything else is looked up. Swap it for
``llm.openai(...)`` and nothing else changes.

    python examples/memory_agent.py --user ada "Remember that I am allergic to peanuts"
    python examples/memory_agent.py --user ada "What food should I avoid?"
    python examples/memory_agent.py --user bob "What food should I avoid?"
    python examples/memory_agent.py --user ada --forget
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.testing import ScriptedLLM, call


def _question(observations: Sequence[sw.Message]) -> str:
    return next(m.text for m in observations if m.role == "user")


def _use_memory(observations: list[sw.Message], options: Sequence[Any]) -> sw.Message:
    question = _question(observations)
    if question.lower().startswith("remember"):
        note = question.split(" ", 1)[1].removeprefix("that ")
        return call("remember", note=note)
    return call("recall", query=question)


def _answer(observations: list[sw.Message], options: Sequence[Any]) -> str:
    result = observations[-1].action_result
    value = None if result is None else result.value
    if value == "remembered":
        return "Noted, I will remember that."
    if not value:
        return "I don't know anything about that yet."
    return "From what you told me: " + "; ".join(value) + "."


# One agent and one pair of memory tools for every user: the namespace is set
# around the call from the run's inputs, never chosen by the model.
model = ScriptedLLM([_use_memory, _answer], name="heuristic_model")
assistant = llm.Agent(
    model,
    instructions="Remember what the user asks you to; recall it when asked.",
    tools=[llm.remember, llm.recall],
    name="assistant",
)


@sw.policy
async def converse(user: str, question: str) -> str:
    """One conversation of ``user`` with the assistant: a durable run."""
    with llm.memory_scope(("users", user)):
        answer: str = await assistant(question=question)
    return answer


async def talk(store: str, user: str, question: str) -> str:
    async with sw.Runner(store) as runner:
        answer: str = await runner.run(converse, user=user, question=question)
    return answer


async def forget(store: str, user: str) -> int:
    """Delete everything kept for ``user``: the rows, and the ledger's copies."""
    async with sw.Runner(store) as runner:
        return await sw.Memory(runner.store).drop(("users", user))


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("question", nargs="?", default="What food should I avoid?")
    parser.add_argument("--user", default="ada")
    parser.add_argument("--store", default="sqlite:///memory_agent.db")
    parser.add_argument("--forget", action="store_true", help="delete the user's memory")
    args = parser.parse_args(argv)
    if args.forget:
        out = f"forgot {asyncio.run(forget(args.store, args.user))} note(s)"
    else:
        out = asyncio.run(talk(args.store, args.user, args.question))
    print(out)
    return out


if __name__ == "__main__":
    main()
