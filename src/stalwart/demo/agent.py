"""The demo's agent: two tools, a heuristic model, and the tool-calling loop.

The model is a :class:`~stalwart.testing.ScriptedLLM` whose replies read
the tool results, so the agent needs no API key and answers the same way on
every execution, which replay requires. Every real execution of a step is
counted in a file outside the process (:data:`PROBE`), which is how the demo
proves that no finished step ran twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.context import Context
from ..core.message import Message
from ..core.policy import policy
from ..testing import ScriptedLLM, call
from .corpus import CORPUS, keywords, words

__all__ = ["PROBE", "TOOLS", "Probe", "model", "read_document", "research", "search_corpus"]


@dataclass
class Probe:
    """What this process does for the demo's proof, set by the part it plays.

    ``counter``: the file each real execution of a step appends a line to (the
    child, and the parent while it resumes the run). ``pause_at``: the key of
    the model step at which the child stops and tells the parent to kill it.
    """

    counter: str | None = None
    pause_at: str | None = None

    def count(self, key: str, name: str) -> None:
        """Append one line per real execution, outside the process, for the proof."""
        if self.counter is None:
            return
        with open(self.counter, "a", encoding="utf-8") as f:
            f.write(f"{key}\t{name}\t{os.getpid()}\n")


PROBE = Probe()


@policy
async def search_corpus(ctx: Context, query: str, limit: int = 3) -> list[dict[str, Any]]:
    """Search the release notes for documents about a topic.

    Args:
        query: Words to look for.
        limit: How many documents to return at most.
    """
    PROBE.count(ctx.step_key, "search_corpus")
    await asyncio.sleep(0.02)  # an index lookup takes a moment
    wanted = set(keywords(query))
    hits: list[dict[str, Any]] = []
    for doc_id, doc in CORPUS.items():
        score = len(wanted & set(words(doc["text"])))
        if score:
            snippet = doc["text"].split(". ")[1][:80]
            hits.append({"id": doc_id, "title": doc["title"], "score": score, "snippet": snippet})
    hits.sort(key=lambda h: (-h["score"], h["id"]))
    return hits[:limit]


@policy
async def read_document(ctx: Context, doc_id: str) -> dict[str, str]:
    """Read one document of the release notes in full.

    Args:
        doc_id: The id a search returned, such as "python-3.11".
    """
    PROBE.count(ctx.step_key, "read_document")
    await asyncio.sleep(0.02)
    if doc_id not in CORPUS:
        raise KeyError(f"no document {doc_id!r}; search first")
    return {"id": doc_id, **CORPUS[doc_id]}


TOOLS = [search_corpus, read_document]


# -- the heuristic model ---------------------------------------------------------
def _question(observations: Sequence[Message]) -> str:
    return next(m.text for m in observations if m.role == "user")


def _subquestions(observations: Sequence[Message]) -> list[str]:
    parts = re.split(r",?\s+and\s+(?=which|what|who|when)", _question(observations).rstrip("?"))
    return [p.strip() for p in parts if p.strip()]


def _results(observations: Sequence[Message], name: str) -> list[Any]:
    return [
        m.action_result.value
        for m in observations
        if m.action_result is not None
        and m.action_result.name == name
        and not m.action_result.is_error
    ]


def _search(n: int) -> Any:
    def reply(observations: list[Message], options: Sequence[Any]) -> Message:
        query = " ".join(keywords(_subquestions(observations)[n]))
        return call("search_corpus", query=query)

    return reply


def _read_top_hit(observations: list[Message], options: Sequence[Any]) -> Message:
    hits = _results(observations, "search_corpus")[-1]
    return call("read_document", doc_id=hits[0]["id"])


def _answer(observations: list[Message], options: Sequence[Any]) -> str:
    lines = []
    docs = _results(observations, "read_document")
    for sub, doc in zip(_subquestions(observations), docs, strict=False):
        wanted = set(keywords(sub))
        sentences = re.split(r"(?<=\.)\s+", doc["text"])
        best = max(sentences, key=lambda s: len(wanted & set(words(s))))
        claim = re.sub(r"^(which|what)\s+(python\s+)?release\s+", "", sub, flags=re.I)
        lines.append(f"{doc['title']} (released {doc['released']}) {claim}: {best}")
    sources = ", ".join(d["id"] for d in docs)
    return "\n".join([*lines, f"Sources: {sources}."])


BRAIN = ScriptedLLM([_search(0), _read_top_hit, _search(1), _read_top_hit, _answer], name="model")


@policy
async def model(
    ctx: Context, observations: list[Message], options: Sequence[Any] = ()
) -> list[Message]:
    """One round of the heuristic model: tool calls, or the final answer."""
    PROBE.count(ctx.step_key, "model")
    if ctx.step_key == PROBE.pause_at:
        # The child's cue: the steps before this one are committed; kill me now.
        line = {"event": "paused", "key": ctx.step_key, "name": "model", "pid": os.getpid()}
        print(json.dumps(line), flush=True)
        await asyncio.Event().wait()
    await asyncio.sleep(0.03)  # a model takes a while to think
    return await BRAIN(ctx, observations, options)


def _stable_ids(messages: list[Message]) -> list[Message]:
    """Name each tool result after its call, the same on every execution.

    The engine builds result messages afresh when it replays a dispatch, with
    new random ids; fed back to the model they would make its next step differ
    from the record (S5). The call ids come from the recorded model output, so
    ids derived from them are stable.
    """
    return [
        replace(m, id=f"{m.action_result.call_id}:result") if m.action_result is not None else m
        for m in messages
    ]


_INSTRUCTIONS = "Answer from the release notes: search, read the best document, then answer."


@policy
async def research(ctx: Context, question: str, max_rounds: int = 8) -> str:
    """A tool-calling agent: ask the model, run the calls it makes, until it answers."""
    # Fixed ids: the conversation is the model step's argument, so it must be
    # the same on every execution for replay to recognise the step (S5).
    conversation = [
        replace(Message.system(_INSTRUCTIONS), id=f"{ctx.run_id}:system"),
        replace(Message.user(question), id=f"{ctx.run_id}:question"),
    ]
    for _ in range(max_rounds):
        reply = await ctx.call(model, conversation, options=TOOLS)
        conversation.extend(_stable_ids(reply))
        if not any(m.is_action_call for m in reply):
            return "\n".join(m.text for m in reply if m.role == "assistant")
    raise RuntimeError(f"no answer after {max_rounds} rounds")
