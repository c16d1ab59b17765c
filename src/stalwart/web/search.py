"""Text search on the runs list: what a query asks, and where each run
found holds its words.

The store finds the runs (``list_runs(text=...)``, its own full-text
index: :mod:`stalwart.stores.search`); this module only shows why each one
matched: the first place a word of the query stands in the run's inputs,
result or error, a few words either side. Each part is plain text the
template escapes; the word found is the one part marked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.ledger import RunRecord
from ..stores import Store
from ..stores.search import search_words, value_text

__all__ = ["ENCRYPTED", "Hit", "check_query", "hits_of"]

#: What the runs list says when the store cannot search text.
ENCRYPTED = (
    "this store is encrypted: text search cannot read its runs' sealed inputs, "
    "results and errors (search by id, policy, status, tag or time)"
)
#: Characters shown either side of a word found.
SIDE = 40
_FIELDS = ("inputs", "result", "error")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Hit:
    """Where a run holds a word of the query: the field, the text before
    the word, the word as written, and the text after."""

    field: str
    before: str
    word: str
    after: str


def check_query(store: Store, text: str) -> list[str]:
    """The words of the runs list's text query; ValueError, for the page to
    show, when it has none or the store cannot search text."""
    if not store.text_search:
        raise ValueError(ENCRYPTED)
    return search_words(text)


def hits_of(rows: Sequence[RunRecord], words: Sequence[str]) -> dict[str, list[Hit]]:
    """Each run's first hit in each of its fields that holds a word of ``words``."""
    if not words:
        return {}
    pattern = re.compile(
        r"(?<![^\W_])(" + "|".join(re.escape(w) for w in words) + r")(?![^\W_])",
        re.IGNORECASE,
    )
    out: dict[str, list[Hit]] = {}
    for run in rows:
        found = []
        for field in _FIELDS:
            text = value_text(getattr(run, field))
            m = pattern.search(text)
            if m is None:
                continue
            start, end = m.span()
            before = text[max(0, start - SIDE) : start]
            after = text[end : end + SIDE]
            found.append(
                Hit(
                    field,
                    ("…" if start > SIDE else "") + _SPACE.sub(" ", before),
                    m.group(0),
                    _SPACE.sub(" ", after) + ("…" if end + SIDE < len(text) else ""),
                )
            )
        out[run.id] = found
    return out
