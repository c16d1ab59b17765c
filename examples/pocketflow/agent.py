"""An agent that decides, step by step, whether to search or to answer.

The classic PocketFlow agent: `DecideAction` asks a model what to do next;
"search" goes to `SearchWeb`, which adds what it found to the conversation
and comes back to decide again; "answer" goes to `AnswerQuestion`. The models
run offline: `ScriptedLLM`s whose replies are small heuristics. Under a
durable store, every decision and search is recorded, and a crashed run
resumes at the node that was running.

    python examples/pocketflow/agent.py "Who created Python and when was Python 3.12 released?"
    python examples/pocketflow/agent.py --store sqlite:///agent.db "What is PocketFlow?"
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.flow import AsyncFlow, AsyncNode
from stalwart.testing import ScriptedLLM, call

WEB = {
    "python-history": "Python was created by Guido van Rossum and first released in 1991.",
    "python-3-12": "Python 3.12 was released on October 2, 2023, with more flexible f-strings.",
    "pocketflow": "PocketFlow is a tiny framework that builds LLM apps from nodes and flows.",
    "stalwart": "Stalwart runs agents durably: a crashed run resumes without redoing work.",
}
STOP = {"the", "a", "an", "of", "is", "was", "what", "who", "when", "and", "did", "it", "how"}


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+(?:\.[0-9]+)?", text.lower()) if w not in STOP}


@sw.policy
async def web_search(query: str) -> str:
    """Search the web (here: a small offline index) and return the best page.

    Args:
        query: What to look for.
    """
    wanted = words(query)
    score, page = max((len(wanted & words(f"{k} {v}")), v) for k, v in WEB.items())
    return page if score else "No results."


def _decide(observations: list[sw.Message], options: Sequence[Any]) -> sw.Message:
    """The decider's heuristic: search each part of the question once, then answer."""
    question = observations[0].text
    searched = {
        m.action_call.arguments["query"]
        for m in observations
        if m.action_call is not None and m.action_call.name == "search"
    }
    for part in re.split(r",?\s+and\s+|\?", question):
        part = part.strip(" ,?")
        if part and part not in searched:
            return call("search", query=part)
    return call("answer")


def _write(observations: list[sw.Message], options: Sequence[Any]) -> str:
    """The writer's heuristic: what the searches found, without repeats."""
    found = [m.text.removeprefix("Found: ") for m in observations if m.text.startswith("Found: ")]
    return " ".join(dict.fromkeys(found)) or "I could not find an answer."


decider = sw.policy(ScriptedLLM([_decide] * 8, name="decider"))
writer = sw.policy(ScriptedLLM([_write], name="writer"))


class DecideAction(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[sw.Message]:
        return shared.get("messages") or [sw.Message.user(shared["question"])]

    async def exec_async(self, messages: list[sw.Message]) -> list[sw.Message]:
        return await decider(observations=messages)

    async def post_async(
        self, shared: dict[str, Any], messages: list[sw.Message], reply: list[sw.Message]
    ) -> str:
        shared["messages"] = [*messages, *reply]
        decision = reply[-1].action_call
        if decision is not None and decision.name == "search":
            shared["query"] = decision.arguments["query"]
            print(f"search: {shared['query']}")
            return "search"
        return "answer"


class SearchWeb(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> str:
        return str(shared["query"])

    async def exec_async(self, query: str) -> str:
        return await web_search(query=query)

    async def post_async(self, shared: dict[str, Any], query: str, page: str) -> str:
        shared["messages"].append(sw.Message.user(f"Found: {page}"))
        return "decide"


class AnswerQuestion(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[sw.Message]:
        return list(shared["messages"])

    async def exec_async(self, messages: list[sw.Message]) -> str:
        reply = await writer(observations=messages)
        return reply[-1].text

    async def post_async(self, shared: dict[str, Any], messages: Any, answer: str) -> None:
        shared["answer"] = answer


def agent_flow() -> AsyncFlow:
    decide, search, answer = DecideAction(), SearchWeb(), AnswerQuestion()
    decide - "search" >> search
    decide - "answer" >> answer
    search - "decide" >> decide
    flow = AsyncFlow(start=decide)
    flow.name = "research_agent"  # type: ignore[attr-defined]
    return flow


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="A search-or-answer agent, offline.")
    parser.add_argument(
        "question", nargs="?", default="Who created Python and when was Python 3.12 released?"
    )
    parser.add_argument("--store", default=None, help="e.g. sqlite:///agent.db (default: memory)")
    args = parser.parse_args(argv)
    shared: dict[str, Any] = sw.Runner(args.store).run_sync(
        agent_flow(), shared={"question": args.question}
    )
    print(f"answer: {shared['answer']}")
    return shared


if __name__ == "__main__":
    main()
