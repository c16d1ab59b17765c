"""Text search over runs: what a run's words are, and what a query's are.

A run is found by the words of its inputs, result and error: the strings
and numbers in each value's JSON (not its keys, not ``true``/``null``), at
most :data:`SEARCH_CHARS` characters of them per value. A word is a run of
letters and digits, compared without case: ``order-1234`` holds the words
``order`` and ``1234``, ``foo_bar`` the words ``foo`` and ``bar``. A query
finds the runs that hold every one of its words, whole.

Each store answers with its own full-text index: SQLite's FTS5 table
``run_text``, PostgreSQL's ``run_text`` table of ``tsvector`` under a GIN
index (the ``simple`` configuration: no stemming, no stop words). Triggers
on ``runs`` note the runs created or changed (``run_text_stale``), and a
search first indexes the runs noted (each store's ``INDEX_STALE``), so an
enqueue pays a note, never the index. The memory store reads the same
words with :func:`value_words`.

A query is only ever a list of words (:func:`search_words`): quotes,
``*``, ``NEAR(``, ``AND`` or ``OR`` in it are text, never query syntax.
"""

from __future__ import annotations

import json
import re

__all__ = [
    "MAX_QUERY_CHARS",
    "SEARCH_CHARS",
    "WORD_PATTERN",
    "search_words",
    "value_text",
    "value_words",
]

#: Characters of a value's words a search reads (each of inputs, result,
#: error): a value's words past them are not found. It keeps PostgreSQL's
#: ``tsvector`` well under its one-megabyte limit whatever a value holds.
SEARCH_CHARS = 20_000
#: The longest query: it holds at most half as many words.
MAX_QUERY_CHARS = 200
#: A word: letters and digits (Unicode's), as Python's ``re`` reads it. The
#: HTTP API's document gives it as the pattern a query must match.
WORD_PATTERN = r"[^\W_]"

_WORD = re.compile(WORD_PATTERN + "+")


def search_words(text: str) -> list[str]:
    """The words of the query ``text``, lower case, each once, in order.

    ValueError, naming the query, when it has none (only punctuation) or
    is longer than :data:`MAX_QUERY_CHARS` characters.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise ValueError(
            f"search text {text[:80]!r}… is {len(text)} characters; at most "
            f"{MAX_QUERY_CHARS} are looked for"
        )
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    if not words:
        raise ValueError(f"search text {text[:80]!r} has no word (letters or digits) to look for")
    return words


def value_text(text: str | None) -> str:
    """The text search reads in one stored value (JSON text, or any text
    that is not JSON, such as a sealed value): its strings and numbers in
    document order, at most :data:`SEARCH_CHARS` characters of them."""
    if text is None:
        return ""
    try:
        tree = json.loads(text, parse_float=str, parse_int=str)
    except (ValueError, RecursionError):
        return text[:SEARCH_CHARS]
    parts: list[str] = []
    _strings(tree, parts)
    return " ".join(parts)[:SEARCH_CHARS]


def value_words(text: str | None) -> set[str]:
    """The words search finds in one stored value: what the SQL stores'
    index holds for it, for the memory store."""
    return {w.lower() for w in _WORD.findall(value_text(text))}


def _strings(tree: object, out: list[str]) -> None:
    """The strings and numbers of a JSON tree, in document order."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
