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

import contextlib
import json
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from ..core.ledger import TERMINAL, RunRecord
from ..core.sealed import sealed_state

__all__ = [
    "EMPTY",
    "PREVIEW",
    "RUN_FIELDS",
    "STEP_FIELDS",
    "SUMMARY",
    "Shown",
    "age",
    "clip",
    "cut",
    "error_summary",
    "fmt_duration",
    "fmt_time",
    "load",
    "parse_time",
    "pretty",
    "reading",
    "run_duration",
    "shown",
    "value_link",
]

#: Characters of one value a page shows; the rest is one link away.
PREVIEW = 4000
#: The recorded values of a run, and of a step, that :func:`value_link` names.
#: Characters of a one-line summary (an error's type and message).
SUMMARY = 500
RUN_FIELDS = ("inputs", "result", "error")
STEP_FIELDS = ("args", "output", "error")


# -- values ----------------------------------------------------------------
#: The trees parsed while one page is rendered, by their text (see :func:`reading`).
_parsed: ContextVar[dict[str, Any] | None] = ContextVar("stalwart_web_parsed", default=None)
#: Texts shorter than this are parsed again rather than remembered.
_REMEMBER = 2048


@contextlib.contextmanager
def reading() -> Iterator[None]:
    """While a page is rendered: each recorded text is parsed once.

    A run page reads a model call's arguments (the conversation so far)
    for the conversation, the token usage and the step's preview; inside
    this block :func:`load` parses each long text once and hands every
    reader the same tree, which readers only read. Nothing is kept after
    the block: the next page parses what it shows.
    """
    token = _parsed.set({})
    try:
        yield
    finally:
        _parsed.reset(token)


def load(text: str | None) -> Any:
    """The JSON tree of a recorded value; text that is not JSON stays text."""
    if text is None:
        return None
    memo = _parsed.get() if len(text) >= _REMEMBER else None
    if memo is not None:
        tree = memo.get(text, _parsed)
        if tree is _parsed:
            tree = memo[text] = _load(text)
        return tree
    return _load(text)


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # a hostile row nested past the parser's depth
        state = sealed_state(text)  # encrypted at rest, no key held; or erased
        return text if state is None else f"({state})"


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
    try:
        return json.dumps(tree, indent=2, ensure_ascii=False, sort_keys=False)
    except RecursionError:  # parsed, but too deep for the encoder (it recurses)
        return text


def value_link(run_id: str, field: str, step: str | None = None) -> str:
    """The address of one whole recorded value (``/run/value``): a run's
    ``field`` (:data:`RUN_FIELDS`), or step ``step``'s (:data:`STEP_FIELDS`)."""
    query = {"id": run_id, "field": field} if step is None else {"id": run_id, "step": step}
    if step is not None:
        query["field"] = field
    return f"/run/value?{urlencode(query)}"


@dataclass(frozen=True)
class Shown:
    """A value as a page shows it: its first :data:`PREVIEW` characters,
    how many more there are, and where the whole value is."""

    text: str
    more: int = 0
    href: str = ""

    def __bool__(self) -> bool:
        return bool(self.text) or self.more > 0

    def __str__(self) -> str:
        return self.text


#: Nothing to show.
EMPTY = Shown("")


def cut(text: str, href: str, limit: int = PREVIEW) -> Shown:
    """``text`` whole when it is short, else its first ``limit`` characters
    and the count of the rest, with ``href`` (the whole value) to follow."""
    if len(text) <= limit:
        return Shown(text)
    return Shown(text[:limit], len(text) - limit, href)


def clip(text: str, limit: int = SUMMARY) -> str:
    """A one-line text at most ``limit`` characters, saying how much is left
    out (the whole is in the value it summarises, one link away)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def shown(text: str | None, href: str, limit: int = PREVIEW) -> Shown:
    """A recorded value as :func:`pretty` lays it out, :func:`cut`.

    A long value is not laid out whole to show its beginning (indented JSON
    is Python's slow encoder, and a model call's arguments hold the whole
    conversation): the first ``limit`` characters come from the indented
    encoder's stream, stopped there, and the count of the rest from the
    compact text (the C encoder, the same tokens) plus the indentation the
    layout adds. What is shown is :func:`pretty`'s text, character for
    character.
    """
    if text is None:
        return EMPTY
    tree = load(text)
    if isinstance(tree, str) and tree == text:
        return cut(text, href, limit)  # not JSON: shown as it is
    head: list[str] = []
    size = 0
    try:
        for chunk in _INDENTED.iterencode(tree):
            head.append(chunk)
            size += len(chunk)
            if size > limit:
                break
        else:
            return Shown("".join(head))
        compact = json.dumps(tree, ensure_ascii=False, separators=(",", ": "))
    except RecursionError:  # parsed, but too deep for the encoders (they recurse)
        return cut(text, href, limit)
    return Shown("".join(head)[:limit], len(compact) + _indentation(tree) - limit, href)


_INDENTED = json.JSONEncoder(indent=2, ensure_ascii=False, sort_keys=False)


def _indentation(tree: Any) -> int:
    """The characters indented JSON (two spaces) adds to the compact text
    of ``tree``: a new line and indent before each item of a non-empty
    container, and before its closing bracket (a loop, not recursion: a
    conversation is thousands of containers)."""
    if not isinstance(tree, dict | list):
        return 0
    total = 0
    stack: list[tuple[Any, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if not node:
            continue
        inner = depth + 1
        total += len(node) * (1 + 2 * inner) + 1 + 2 * depth
        for item in node.values() if isinstance(node, dict) else node:
            if isinstance(item, dict | list):
                stack.append((item, inner))
    return total


def error_summary(text: str | None) -> str:
    """``Type: message`` of a recorded error (``{"type": ..., "message": ...}``)."""
    tree = load(text)
    if isinstance(tree, dict):
        kind = str(tree.get("type", "error")).rsplit(".", 1)[-1]
        return clip(f"{kind}: {tree.get('message', '')}")
    return "" if text is None else clip(str(tree))


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
