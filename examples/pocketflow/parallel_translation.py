"""Parallel batch translation: one text into several languages at once.

`TranslateText` is an `AsyncParallelBatchNode`: its items (one per language)
run concurrently, so eight translations that each take 0.1 s finish in about
0.1 s. Each item calls the `translate` policy, a recorded step under a
durable store (a crash re-translates only the languages in flight). The
"translator" is a word list, so this runs offline.

    python examples/pocketflow/parallel_translation.py "the agent reads the book"
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.flow import AsyncFlow, AsyncParallelBatchNode

LEXICON: dict[str, dict[str, str]] = {
    "french": {"the": "le", "agent": "agent", "reads": "lit", "book": "livre", "good": "bon"},
    "spanish": {"the": "el", "agent": "agente", "reads": "lee", "book": "libro", "good": "buen"},
    "german": {"the": "der", "agent": "Agent", "reads": "liest", "book": "Buch", "good": "gut"},
    "italian": {"the": "il", "agent": "agente", "reads": "legge", "book": "libro", "good": "buon"},
    "portuguese": {"the": "o", "agent": "agente", "reads": "lê", "book": "livro", "good": "bom"},
    "dutch": {"the": "de", "agent": "agent", "reads": "leest", "book": "boek", "good": "goed"},
    "swedish": {"the": "", "agent": "agenten", "reads": "läser", "book": "boken", "good": "bra"},
    "danish": {"the": "", "agent": "agenten", "reads": "læser", "book": "bogen", "good": "god"},
}
LATENCY = 0.1  # what each "model call" takes


@sw.policy
async def translate(text: str, language: str) -> str:
    """Translate ``text`` word by word (a stand-in for a model call).

    Args:
        text: English text.
        language: The target language.
    """
    await asyncio.sleep(LATENCY)
    words = LEXICON[language]
    return " ".join(w for w in (words.get(t, t) for t in text.lower().split()) if w)


class TranslateText(AsyncParallelBatchNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[tuple[str, str]]:
        return [(shared["text"], language) for language in shared["languages"]]

    async def exec_async(self, item: tuple[str, str]) -> str:
        text, language = item
        return await translate(text=text, language=language)

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: list[str]) -> None:
        shared["translations"] = dict(zip(shared["languages"], exec_res, strict=True))


def translation_flow() -> AsyncFlow:
    flow = AsyncFlow(start=TranslateText())
    flow.name = "parallel_translation"  # type: ignore[attr-defined]
    return flow


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="Translate into many languages in parallel.")
    parser.add_argument("text", nargs="?", default="the agent reads the good book")
    parser.add_argument("--store", default=None, help="e.g. sqlite:///translations.db")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    shared: dict[str, Any] = sw.Runner(args.store).run_sync(
        translation_flow(), shared={"text": args.text, "languages": list(LEXICON)}
    )
    shared["elapsed"] = time.perf_counter() - started
    for language, text in shared["translations"].items():
        print(f"{language:>10}: {text}")
    print(f"{len(LEXICON)} translations of {LATENCY} s each took {shared['elapsed']:.2f} s in all")
    return shared


if __name__ == "__main__":
    main()
