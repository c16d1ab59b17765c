"""A research agent that searches a small local corpus and answers.

No API key needed: the "model" is a heuristic policy written with
``ScriptedLLM`` — each reply is a function of the conversation so far. Swap it
for ``sw.llm.openai(...)`` or ``sw.llm.anthropic(...)`` and nothing else
changes. Runs in memory by default; pass a store URL to make it durable:

    python examples/search_agent.py "When did Python 3.12 come out?"
    python examples/search_agent.py --store sqlite:///agents.db "Who created Python?"
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.testing import ScriptedLLM, call

CORPUS = {
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
        "It arrived in Python 3.4 and TaskGroup was added in Python 3.11."
    ),
}

_WORD = re.compile(r"[a-z0-9.]+")


def _words(text: str) -> set[str]:
    return {w.strip(".") for w in _WORD.findall(text.lower())} - {
        "",
        "the",
        "a",
        "of",
        "is",
        "was",
        "with",
        "what",
        "when",
        "who",
        "in",
        "and",
    }


@sw.policy
async def search(query: str, max_results: int = 3) -> list[dict[str, Any]]:
    """Search the local corpus.

    Args:
        query: Words to look for.
        max_results: How many documents to return at most.
    """
    wanted = _words(query)
    scored = sorted(
        (
            (len(wanted & _words(doc_id.replace("-", " ") + " " + text)), doc_id)
            for doc_id, text in CORPUS.items()
        ),
        reverse=True,
    )
    return [
        {"id": doc_id, "snippet": CORPUS[doc_id][:80]}
        for score, doc_id in scored[:max_results]
        if score > 0
    ]


@sw.policy
async def read(doc_id: str) -> str:
    """Read a whole document of the corpus.

    Args:
        doc_id: The id a search returned.
    """
    if doc_id not in CORPUS:
        raise KeyError(f"no document {doc_id!r}")
    return CORPUS[doc_id]


def _last_result(observations: Sequence[sw.Message]) -> Any:
    for m in reversed(observations):
        if m.action_result is not None:
            return m.action_result.value
    return None


def _question(observations: Sequence[sw.Message]) -> str:
    return next(m.text for m in observations if m.role == "user")


def _search_first(observations: list[sw.Message], options: Sequence[Any]) -> sw.Message:
    return call("search", query=_question(observations))


def _read_best(observations: list[sw.Message], options: Sequence[Any]) -> Any:
    hits = _last_result(observations) or []
    if not hits:
        return "I found nothing about that in the corpus."
    return call("read", doc_id=hits[0]["id"])


def _answer(observations: list[sw.Message], options: Sequence[Any]) -> str:
    text = _last_result(observations)
    if not isinstance(text, str):
        return "I found nothing about that in the corpus."
    wanted = _words(_question(observations))
    sentences = [s.strip() for s in text.split(". ") if s.strip()]
    best = max(sentences, key=lambda s: len(wanted & _words(s)))
    return best.rstrip(".") + "."


# A heuristic model: search, read the best hit, answer from it.
model = ScriptedLLM([_search_first, _read_best, _answer], name="heuristic_model")


@sw.policy
async def research(ctx: sw.Context, question: str) -> str:
    """Answer a question with the tools, the way an LLM agent loop does."""
    history = [sw.Message.system("Use the tools to answer."), sw.Message.user(question)]
    while True:
        actions = await ctx.call(model, observations=history, options=[search, read])
        history += actions  # the calls, then their results
        if not any(m.is_action_call for m in actions):
            return actions[-1].text


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("question", nargs="?", default="When was Python 3.12 released?")
    parser.add_argument("--store", default=None, help="e.g. sqlite:///agents.db")
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    args = parser.parse_args(argv)
    answer: str = sw.Runner(args.store).run_sync(
        research, question=args.question, run_id=args.run_id
    )
    print(json.dumps({"answer": answer}) if args.json else answer)
    return answer


if __name__ == "__main__":
    main()
