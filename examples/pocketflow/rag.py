"""Retrieval-augmented generation: an offline indexing flow and an online query flow.

Offline, `ChunkDocuments` splits each document into sentences and
`EmbedChunks` embeds every chunk (both batch nodes: under a durable store a
crash re-embeds only the chunk in flight). Online, `EmbedQuery`,
`RetrieveChunks` and `GenerateAnswer` answer a question from the top chunks.
The embedding is local and tiny (hashed bag of words, no download) and the
"model" that writes the answer is a heuristic, so this runs anywhere.

    python examples/pocketflow/rag.py "How does a durable run recover from a crash?"
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import re
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.flow import BatchNode, Flow, Node

DOCUMENTS = {
    "durability.md": (
        "Stalwart records every step of a run in a ledger. "
        "After a crash, a durable run recovers by replay: finished steps return their "
        "recorded results and only the unfinished work runs again. "
        "SQLite is the default store and needs no server."
    ),
    "flows.md": (
        "A flow is a graph of nodes joined by actions. "
        "Each node has prep, exec and post: prep reads the shared store, exec does the work, "
        "post writes the store and picks the next action. "
        "Batch nodes run exec once per item."
    ),
    "agents.md": (
        "An agent is a policy that reads observations and returns actions. "
        "Stalwart runs the tool calls a model asks for and records each of them. "
        "A human can approve a step by sending a signal to a waiting run."
    ),
}

DIM = 128
STOP = {"a", "an", "the", "of", "is", "are", "and", "to", "by", "its", "each", "does", "how", "it"}


def tokens(text: str) -> list[str]:
    found = re.findall(r"[a-z]+", text.lower())
    return [w.removesuffix("s") for w in found if w not in STOP]


def embed(text: str) -> list[float]:
    """A hashed bag of words: stable across processes, normalised to length 1."""
    vector = [0.0] * DIM
    for word in tokens(text):
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
        vector[digest % DIM] += 1.0 if digest & 1 << 31 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [round(v / norm, 6) for v in vector]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def call_llm(question: str, context: list[str]) -> str:
    """The offline "model": answer with the context sentence closest to the question."""
    if not context:
        return "I don't know."
    wanted = set(tokens(question))
    return max(context, key=lambda s: len(wanted & set(tokens(s))))


# -- offline: index the documents ------------------------------------------------------
class ChunkDocuments(BatchNode):
    def prep(self, shared: dict[str, Any]) -> list[list[str]]:
        return [[name, text] for name, text in shared["documents"].items()]

    def exec(self, doc: list[str]) -> list[dict[str, str]]:
        name, text = doc
        sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", text) if s.strip()]
        return [{"source": name, "text": s} for s in sentences]

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[Any]) -> None:
        shared["chunks"] = [chunk for chunks in exec_res for chunk in chunks]


class EmbedChunks(BatchNode):
    def prep(self, shared: dict[str, Any]) -> list[str]:
        return [chunk["text"] for chunk in shared["chunks"]]

    def exec(self, text: str) -> list[float]:
        return embed(text)

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[list[float]]) -> None:
        shared["index"] = exec_res
        print(f"indexed {len(exec_res)} chunks")


def indexing_flow() -> Flow:
    chunk = ChunkDocuments()
    chunk >> EmbedChunks()
    flow = Flow(start=chunk)
    flow.name = "rag_index"  # type: ignore[attr-defined]
    return flow


# -- online: answer a question ---------------------------------------------------------
class EmbedQuery(Node):
    def prep(self, shared: dict[str, Any]) -> str:
        return str(shared["question"])

    def exec(self, question: str) -> list[float]:
        return embed(question)

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[float]) -> None:
        shared["query_embedding"] = exec_res


class RetrieveChunks(Node):
    def prep(self, shared: dict[str, Any]) -> tuple[list[float], list[Any], list[Any]]:
        return shared["query_embedding"], shared["index"], shared["chunks"]

    def exec(self, inputs: tuple[list[float], list[Any], list[Any]]) -> list[dict[str, str]]:
        query, index, chunks = inputs
        ranked = sorted(range(len(index)), key=lambda i: cosine(query, index[i]), reverse=True)
        return [chunks[i] for i in ranked[: self.params.get("top_k", 2)]]

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[Any]) -> None:
        shared["retrieved"] = exec_res


class GenerateAnswer(Node):
    def prep(self, shared: dict[str, Any]) -> tuple[str, list[str]]:
        return shared["question"], [chunk["text"] for chunk in shared["retrieved"]]

    def exec(self, inputs: tuple[str, list[str]]) -> str:
        return call_llm(*inputs)

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: str) -> None:
        shared["answer"] = exec_res


def query_flow() -> Flow:
    embed_query, retrieve, generate = EmbedQuery(), RetrieveChunks(), GenerateAnswer()
    embed_query >> retrieve >> generate
    flow = Flow(start=embed_query)
    flow.name = "rag_query"  # type: ignore[attr-defined]
    return flow


async def answer(question: str, store: str | None = None) -> dict[str, Any]:
    async with sw.Runner(store) as runner:
        shared = await runner.run(indexing_flow(), shared={"documents": DOCUMENTS})
        shared["question"] = question
        result: dict[str, Any] = await runner.run(query_flow(), shared=shared)
        return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="RAG over a few local documents, offline.")
    parser.add_argument(
        "question", nargs="?", default="How does a durable run recover after a crash?"
    )
    parser.add_argument("--store", default=None, help="e.g. sqlite:///rag.db (default: memory)")
    args = parser.parse_args(argv)
    shared = asyncio.run(answer(args.question, args.store))
    for chunk in shared["retrieved"]:
        print(f"retrieved from {chunk['source']}: {chunk['text']}")
    print(f"answer: {shared['answer']}")
    return shared


if __name__ == "__main__":
    main()
