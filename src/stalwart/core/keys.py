"""The order S1 step keys define, and which steps come before a given one.

In the core because a recorded argument may refer only to a step made
earlier in this order (``core/stepargs.py``): what a fork or an export of a
prefix of steps copies then holds every step its records refer to.

A key is its parent's key plus a suffix: ``.n`` a child call (``.exec``,
``.post``... for a flow's units), ``#n`` the n-th action call a step's reply
asked for, ``@n`` the n-th attempt of a retried step (its children hang under
it). Read as a sequence of parts, keys sort in the order a run made them:
children of the first attempt, then of later attempts, then the dispatched
action calls; a flow visit's ``prep``, then its ``exec``, its walk, its
``post``. Parts are compared as numbers, never as text (``1.10`` after
``1.9``).
"""

from __future__ import annotations

import re

__all__ = ["before", "is_ancestor", "key_parts", "sort_keys"]

_PART = re.compile(r"([.#@]?)([^.#@]+)")
# The separator's rank: a child of the attempt in progress, a later attempt,
# then the action calls dispatched once every attempt is over.
_SEPARATOR = {".": 0, "": 0, "@": 1, "#": 2}
# A flow visit's units in the order it runs them (``stalwart.flow.durable``).
_PHASES = {"prep": 0, "exec": 1, "walk": 2, "post": 3}

Part = tuple[int, int, int, str]


def key_parts(key: str) -> tuple[Part, ...]:
    """``key`` as comparable parts: (separator, number-or-word, value, word)."""
    parts: list[Part] = []
    for sep, text in _PART.findall(key):
        rank = _SEPARATOR[sep]
        if text.isdigit():
            parts.append((rank, 0, int(text), ""))
        else:
            parts.append((rank, 1, _PHASES.get(text, len(_PHASES)), text))
    return tuple(parts)


def sort_keys(keys: list[str]) -> list[str]:
    """``keys`` in the order their run made them (S1)."""
    return sorted(keys, key=key_parts)


def is_ancestor(key: str, of: str) -> bool:
    """Whether step ``key`` encloses step ``of``: its record holds what
    ``of`` returned. A step's action calls (``key#n``) are not enclosed: the
    engine runs them after the step's reply is recorded."""
    a, b = key_parts(key), key_parts(of)
    return len(a) < len(b) and b[: len(a)] == a and b[len(a)][0] != _SEPARATOR["#"]


def before(key: str, at: str) -> bool:
    """Whether step ``key`` finished before the run reached step ``at``: made
    earlier in S1 order, and not a step enclosing ``at`` (whose record holds
    what ``at`` and its siblings returned, so it must run again)."""
    return key_parts(key) < key_parts(at) and not is_ancestor(key, at)
