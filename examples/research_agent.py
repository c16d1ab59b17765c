"""A research agent: a real model answers from a small library with two tools.

The model searches the library, reads what looks relevant, and answers with
the ids of the documents it used. It runs with OPENAI_API_KEY or
ANTHROPIC_API_KEY set (without one it says how to set one); pass a store to
make the run durable, so that a run killed midway resumes without paying for
the model calls it already made:

    export OPENAI_API_KEY=sk-...
    python examples/research_agent.py "What did Python 3.13 add?"
    python examples/research_agent.py --store sqlite:///agents.db --run-id q1 "Who made Python?"
    python examples/research_agent.py --model anthropic:claude-haiku-4-5 "When did asyncio arrive?"
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import llm

LIBRARY = {
    "python-history": (
        "Python was created by Guido van Rossum and first released in February 1991. "
        "Its name comes from the BBC comedy series Monty Python's Flying Circus."
    ),
    "python-3-12": (
        "Python 3.12 was released on October 2, 2023. It brought more flexible f-strings, "
        "a per-interpreter GIL and better error messages."
    ),
    "python-3-13": (
        "Python 3.13 was released on October 7, 2024, with an experimental free-threaded "
        "build, a new interactive interpreter and an experimental JIT compiler."
    ),
    "python-3-14": (
        "Python 3.14 was released on October 7, 2025. It made the free-threaded build "
        "officially supported and added template strings (t-strings)."
    ),
    "asyncio": (
        "asyncio is Python's library for writing concurrent code with async and await. "
        "It arrived in Python 3.4, and TaskGroup was added in Python 3.11."
    ),
}

INSTRUCTIONS = """\
You answer questions about Python from a small library of documents.
Search the library, read the documents that look relevant, then answer in one
or two sentences. End with the ids of the documents you used, like [python-3-13].
If the library does not say, answer that you do not know."""

NO_KEY = """\
This example calls a real model, and no API key is set. Set one of:

    export OPENAI_API_KEY=sk-...         # uses openai:gpt-4.1-mini
    export ANTHROPIC_API_KEY=sk-ant-...  # uses anthropic:claude-haiku-4-5

then run it again (or pick a model with --model provider:model)."""


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+(?:\.[0-9]+)*", text.lower()))


@sw.policy
async def search(query: str, max_results: int = 3) -> list[dict[str, str]]:
    """Search the library; returns the ids and first words of the best matches.

    Args:
        query: Words to look for.
        max_results: How many documents to return at most.
    """
    wanted = _words(query)
    scored = sorted(
        (
            (len(wanted & _words(doc_id.replace("-", " ") + " " + text)), doc_id)
            for doc_id, text in LIBRARY.items()
        ),
        reverse=True,
    )
    return [
        {"id": doc_id, "snippet": LIBRARY[doc_id][:80]}
        for score, doc_id in scored[:max_results]
        if score > 0
    ]


@sw.policy
async def read(doc_id: str) -> str:
    """Read a whole document of the library.

    Args:
        doc_id: An id that search returned.
    """
    if doc_id not in LIBRARY:
        raise KeyError(f"no document {doc_id!r}; search first for the ids")
    return LIBRARY[doc_id]


def build_agent(model: Any) -> llm.Agent:
    """The research agent on ``model`` (a provider, a model string, or a scripted model)."""
    return llm.Agent(
        model, instructions=INSTRUCTIONS, tools=[search, read], name="researcher", max_rounds=8
    )


async def research(
    model: Any, question: str, *, store: str | None = None, run_id: str | None = None
) -> str:
    """Answer ``question``; durable when ``store`` is given (e.g. ``sqlite:///agents.db``)."""
    agent = build_agent(model)
    async with sw.Runner(store, policies=[agent]) as runner:
        answer: str = await agent.run(question, runner=runner, run_id=run_id)
    return answer


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
    parser = argparse.ArgumentParser(description="A research agent with two tools.")
    parser.add_argument("question", nargs="?", default="What did Python 3.13 add?")
    parser.add_argument("--model", help="provider:model, e.g. openai:gpt-4.1-mini")
    parser.add_argument("--store", help="make the run durable, e.g. sqlite:///agents.db")
    parser.add_argument("--run-id", help="name the run (starting it again resumes it)")
    args = parser.parse_args(argv)
    try:
        model = model_from_env(args.model)
    except llm.MissingAPIKey as exc:
        print(f"{exc}\n\n{NO_KEY}")
        return 0
    if model is None:
        print(NO_KEY)
        return 0
    print(asyncio.run(research(model, args.question, store=args.store, run_id=args.run_id)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
