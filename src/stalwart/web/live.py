"""What a live refresh may skip: the token a run's fragment carries, and
what the inspector remembers from one refresh to the next.

A run's live region is fetched every few seconds while the run is
unfinished, and a long run's ledger is most of what a fetch would read.
Everything the fragment shows comes from the run's row, its steps and its
children's rows; steps are only ever added to a run (continue-as-new, which
replaces them, rewrites the row; prune deletes the whole run). So the run's
row, its step count and its children's rows say whether the fragment would
change: the fragment carries a token made of the count and a digest of the
rest (:func:`shown_token`), the browser sends it back, and a refresh whose
token is still the one the server would make now is answered "unchanged"
after reading the row and a count, no step.

The token is data from the browser and is trusted for nothing but skipping
work: :func:`parse_shown` takes only the shape the server writes, and the
server compares the whole token with one it makes itself from what the store
holds now, so a forged or stale token costs a full render, never a wrong
page. The digest is keyed by a secret of this server (its CSRF token, made at
start): after a restart the forms a page holds carry an old CSRF token, and a
token of the old server matches nothing, so the page is rendered again, with
forms that work.

The children's ids are written in the parent's steps, which a quiet refresh
does not read: the server remembers the ids of each run it rendered
(:class:`Recall`, bounded). Remembering wrongly (another render since, an
eviction) only costs a render, as the ids are part of the digest.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from typing import Generic, TypeVar

from ..core.ledger import RunRecord
from .conversation import Asked

__all__ = [
    "SHOWN",
    "Memory",
    "Recall",
    "WaitMark",
    "parse_shown",
    "same_shown",
    "shown_token",
]

#: The query parameter a live region sends its fragment's token back in.
SHOWN = "shown"

_DIGEST_BYTES = 16
_TOKEN = re.compile(rf"(\d{{1,9}})\.([0-9a-f]{{{2 * _DIGEST_BYTES}}})")

K = TypeVar("K")
V = TypeVar("V")


def shown_token(
    secret: str,
    run: RunRecord,
    count: int,
    children: Sequence[tuple[str, RunRecord | None]],
) -> str:
    """``<count>.<digest>``: what a run's fragment shows, for the next refresh
    to compare with.

    ``count`` is how many steps it shows (a refresh reads the store's count
    first, and only when it is this one compares the digest); the digest
    covers every field of the run's row and of each child's (``None`` for a
    pruned one), keyed by ``secret``.
    """
    what = (astuple(run), count, [(i, None if c is None else astuple(c)) for i, c in children])
    key = hashlib.blake2b(secret.encode(), digest_size=32).digest()  # any length -> a key
    digest = hashlib.blake2b(repr(what).encode(), key=key, digest_size=_DIGEST_BYTES)
    return f"{count}.{digest.hexdigest()}"


def parse_shown(text: str | None) -> tuple[int, str] | None:
    """The step count of a token the browser sent back, and the token; None
    for anything but the shape :func:`shown_token` writes (then the fragment
    is rendered in full)."""
    if not text or len(text) > 64:
        return None
    found = _TOKEN.fullmatch(text)
    if found is None:
        return None
    return int(found.group(1)), text


def same_shown(given: str, now: str) -> bool:
    """Whether the token the browser sent is the one the server makes now."""
    return hmac.compare_digest(given.encode(), now.encode())


class Recall(Generic[K, V]):
    """At most ``size`` values by key, the least recently used dropped
    first: what a refresh may reuse, never what it must have."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._values.get(key)
        if value is not None:
            self._values.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._values[key] = value
        self._values.move_to_end(key)
        while len(self._values) > self.size:
            self._values.popitem(last=False)

    def drop(self, key: K) -> None:
        self._values.pop(key, None)

    def __len__(self) -> int:
        return len(self._values)


#: A waiting run as the waiting list remembers its question by: its id,
#: fence, last update and the signal it waits for. Its steps cannot change
#: while these do not: only a worker that claims it (a new fence) records.
WaitMark = tuple[str, int, float, str | None]


@dataclass
class Memory:
    """What the inspector remembers between refreshes, one per app.

    ``children``: the child ids of each run last rendered with children.
    ``questions``: the question each waiting run asked, by :data:`WaitMark`,
    as the page shows it: cut as every value is (:func:`.values.cut`), so a
    refresh that reuses it renders what a full page does, and the memory
    holds at most a preview of each question, never a whole long one.
    """

    children: Recall[str, tuple[str, ...]] = field(default_factory=lambda: Recall(1024))
    questions: Recall[WaitMark, Asked] = field(default_factory=lambda: Recall(1024))
