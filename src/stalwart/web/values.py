"""Recorded values and times as the text a page shows.

Everything the inspector shows is computed from records as plain data: the
ledger's JSON text is read with :func:`json.loads` and the plain tree it gives
is walked (here, in :mod:`.steps` and in :mod:`.conversation`). No recorded
value is decoded back into a class (no codec, no declared types), so the
inspector needs none of the application's code, and nothing a store holds can
make it import or call anything (S13). The templates receive strings and
numbers only; Jinja escapes them.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from ..core.ledger import TERMINAL, RunRecord

__all__ = [
    "age",
    "error_summary",
    "fmt_duration",
    "fmt_time",
    "load",
    "parse_time",
    "pretty",
    "run_duration",
]


# -- values ----------------------------------------------------------------
def load(text: str | None) -> Any:
    """The JSON tree of a recorded value; text that is not JSON stays text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # a hostile row nested past the parser's depth
        return text


def pretty(text: str | None) -> str:
    """A recorded value as indented JSON text, for a ``<pre>``.

    Only the layout changes: the tree is the recorded one, codec tags
    included, so what is shown is what is stored.
    """
    if text is None:
        return ""
    tree = load(text)
    if isinstance(tree, str) and tree == text:
        return text  # not JSON: shown as it is
    return json.dumps(tree, indent=2, ensure_ascii=False, sort_keys=False)


def error_summary(text: str | None) -> str:
    """``Type: message`` of a recorded error (``{"type": ..., "message": ...}``)."""
    tree = load(text)
    if isinstance(tree, dict):
        kind = str(tree.get("type", "error")).rsplit(".", 1)[-1]
        return f"{kind}: {tree.get('message', '')}"
    return "" if text is None else str(tree)


# -- time ------------------------------------------------------------------
def fmt_time(ts: float | None) -> str:
    """A timestamp in UTC, to the second (the page says UTC once)."""
    if ts is None:
        return ""
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):  # a wake time in the year 33715
        return f"{ts:.0f} (beyond the calendar)"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def parse_time(text: str) -> float | None:
    """A filter's time: ISO 8601 (a time without a zone is UTC), or a Unix
    timestamp. None for an empty field; ValueError, shown to the user, for
    anything else."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def run_duration(run: RunRecord) -> float | None:
    """How long a finished run took from creation to its outcome."""
    return run.updated_at - run.created_at if run.status in TERMINAL else None


def age(ts: float, now: float | None = None) -> str:
    """How long ago ``ts`` was, for "waiting since"."""
    return fmt_duration((now if now is not None else time.time()) - ts)
