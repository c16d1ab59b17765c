"""What the pages show, computed from records as plain data.

Everything here reads the ledger's JSON text with :func:`json.loads` and walks
the plain tree it gives: no recorded value is decoded back into a class (no
codec, no declared types), so the inspector needs none of the application's
code, and nothing a store holds can make it import or call anything (S13).
The templates receive strings and numbers only; Jinja escapes them.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..core.ledger import CHILD_MARK, TERMINAL, RunRecord, StepRecord

__all__ = [
    "Bubble",
    "StepNode",
    "bubbles",
    "child_ids",
    "events_of",
    "fmt_duration",
    "fmt_time",
    "parse_time",
    "pending_prompt",
    "pretty",
    "step_tree",
    "timeline",
    "usage_by_model",
]

_TAG = "$t"
_MSG = "msg"


# -- values ----------------------------------------------------------------
def load(text: str | None) -> Any:
    """The JSON tree of a recorded value; text that is not JSON stays text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
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
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


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


# -- the step tree ---------------------------------------------------------
_SEGMENT = re.compile(r"[.#]")


def parent_key(key: str) -> str:
    """The key of the step that made the call at ``key`` ("" for the root).

    Keys grow by ``.n`` for a call and ``#n`` for an option call a step's
    reply asked for (S1): ``1.2#1``'s parent is ``1.2``, whose parent is ``1``.
    """
    cut = max(key.rfind("."), key.rfind("#"))
    return key[:cut] if cut > 0 else ""


def _key_order(key: str) -> tuple[tuple[int, int | str], ...]:
    """Sort keys as numbers (``2`` before ``10``), ``.`` calls before ``#`` ones."""
    out: list[tuple[int, int | str]] = []
    for sep, part in re.findall(r"(^|[.#])([^.#]*)", key):
        rank = 0 if sep != "#" else 1
        out.append((rank, int(part)) if part.isdigit() else (rank + 2, part))
    return tuple(out)


@dataclass
class StepNode:
    """A step for the tree: its record (None for a step still running, known
    only because its children are recorded), and its children."""

    key: str
    record: StepRecord | None
    children: list[StepNode] = field(default_factory=list)

    @property
    def duration(self) -> str:
        r = self.record
        return "" if r is None else fmt_duration(r.finished_at - r.started_at)

    @property
    def failed(self) -> bool:
        return self.record is not None and self.record.error is not None

    @property
    def error(self) -> str:
        return "" if self.record is None else error_summary(self.record.error)

    @property
    def args(self) -> str:
        return "" if self.record is None else pretty(self.record.args)

    @property
    def output(self) -> str:
        r = self.record
        if r is None:
            return ""
        return pretty(r.error) if r.error is not None else pretty(r.output)


def step_tree(steps: Mapping[str, StepRecord]) -> list[StepNode]:
    """The recorded steps nested by key, each level in call order.

    A parent records its outcome after its children, so a running run has
    children whose parent has no record yet: the parent appears with none.
    """
    nodes: dict[str, StepNode] = {k: StepNode(k, rec) for k, rec in steps.items()}
    for key in list(nodes):
        while key:
            up = parent_key(key)
            if not up or up in nodes:
                break
            nodes[up] = StepNode(up, None)
            key = up
    roots: list[StepNode] = []
    for key in sorted(nodes, key=_key_order):
        up = parent_key(key)
        (nodes[up].children if up else roots).append(nodes[key])
    return roots


def flatten(nodes: Iterable[StepNode], depth: int = 0) -> Iterator[tuple[int, StepNode]]:
    for node in nodes:
        yield depth, node
        yield from flatten(node.children, depth + 1)


@dataclass(frozen=True)
class Span:
    """A bar of the timeline: where a step starts and how wide it is, in
    percent of the run's span."""

    key: str
    name: str
    depth: int
    left: float
    width: float
    failed: bool
    title: str


def timeline(run: RunRecord, steps: Mapping[str, StepRecord]) -> list[Span]:
    """The steps as bars on the run's time axis, tree order."""
    recs = list(steps.values())
    if not recs:
        return []
    start = min([run.created_at, *(r.started_at for r in recs if r.started_at)])
    end = max([run.updated_at, *(r.finished_at for r in recs)])
    total = max(end - start, 1e-6)
    out: list[Span] = []
    for depth, node in flatten(step_tree(steps)):
        r = node.record
        if r is None:
            continue
        begin = r.started_at or r.finished_at
        left = 100.0 * (begin - start) / total
        width = max(100.0 * (r.finished_at - begin) / total, 0.4)
        title = f"{node.key} {r.name} {fmt_duration(r.finished_at - begin)}"
        out.append(
            Span(node.key, r.name, depth, round(left, 2), round(width, 2), node.failed, title)
        )
    return out


def events_of(steps: Mapping[str, StepRecord]) -> list[StepRecord]:
    """What the runtime recorded besides calls (timers, signals received,
    recorded clocks and ids, child runs spawned, patch markers), in time order."""
    return sorted(
        (s for s in steps.values() if s.kind != "call"), key=lambda s: (s.finished_at, s.key)
    )


def child_ids(run: RunRecord, steps: Mapping[str, StepRecord]) -> list[str]:
    """The ids of the child runs this run spawned, from its spawn records.

    A spawn step records the ids it started; only ids shaped as this run's
    children (``parent~key/i``) are taken, whatever else a row holds.
    """
    out: list[str] = []
    mine = run.id + CHILD_MARK
    for s in sorted(steps.values(), key=lambda s: _key_order(s.key)):
        if not s.name.startswith("stalwart.spawn:"):
            continue
        ids = load(s.output)
        if isinstance(ids, list):
            out.extend(i for i in ids if isinstance(i, str) and i.startswith(mine))
    return out


# -- messages --------------------------------------------------------------
@dataclass(frozen=True)
class Bubble:
    """One message of the conversation, as text fields only."""

    role: str
    actor: str
    texts: tuple[str, ...] = ()
    media: tuple[str, ...] = ()
    call_name: str = ""
    call_id: str = ""
    call_args: str = ""
    call_invalid: str = ""
    result_name: str = ""
    result_value: str = ""
    result_error: str = ""
    step: str = ""


def _messages(tree: Any) -> Iterator[dict[str, Any]]:
    """Recorded messages (``{"$t": "msg", "v": {...}}``) in a tree, in order."""
    if isinstance(tree, list):
        for item in tree:
            yield from _messages(item)
    elif isinstance(tree, dict):
        if tree.get(_TAG) == _MSG and isinstance(tree.get("v"), dict):
            yield tree["v"]
            return
        for value in tree.values():
            yield from _messages(value)


def _fingerprint(msg: dict[str, Any]) -> str:
    # Recorded arguments leave message ids out, and usage lives in meta: the
    # same message read from a model call's arguments and from the previous
    # call's output differs only there.
    return json.dumps({k: v for k, v in msg.items() if k not in ("id", "meta")}, sort_keys=True)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _bubble(msg: dict[str, Any], step: str) -> Bubble:
    texts: list[str] = []
    media: list[str] = []
    parts = msg.get("parts")
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        else:
            size = len(str(part.get("data", ""))) * 3 // 4
            where = f"{size} bytes inline" if "data" in part else f"at {part.get('url', '')}"
            media.append(f"{part.get('mime_type', 'media')}, {where}")
    call = _dict(msg.get("call"))
    result = _dict(msg.get("result"))
    error = ""
    if result.get("error_type") is not None:
        error = f"{result.get('error_type')}: {result.get('error_message', '')}"
    value = result.get("value")
    return Bubble(
        role=str(msg.get("role", "")),
        actor=str(msg.get("actor", "")),
        texts=tuple(texts),
        media=tuple(media),
        call_name=str(call.get("name", "")),
        call_id=str(call.get("id", "")),
        call_args=json.dumps(call.get("arguments"), indent=2, ensure_ascii=False) if call else "",
        call_invalid=str(call.get("invalid") or ""),
        result_name=str(result.get("name", "")),
        result_value=(
            value
            if isinstance(value, str)
            else json.dumps(value, indent=2, ensure_ascii=False)
            if "value" in result
            else ""
        ),
        result_error=error,
        step=step,
    )


def bubbles(steps: Mapping[str, StepRecord]) -> list[Bubble]:
    """The conversation the run's steps hold, each message once, in order.

    A model call's arguments hold the whole conversation so far and its
    output the new reply, so the messages of every step, read in the order
    the steps started, give the conversation when each message is kept once.
    "Once" is per count: a message said twice within one step's value (a
    user who typed "yes" twice) stays twice.
    """
    shown: dict[str, int] = {}
    out: list[Bubble] = []
    for s in sorted(steps.values(), key=lambda s: (s.started_at, _key_order(s.key))):
        for text in (s.args, s.output):
            here: dict[str, int] = {}
            for msg in _messages(load(text)):
                fp = _fingerprint(msg)
                here[fp] = here.get(fp, 0) + 1
                if here[fp] > shown.get(fp, 0):
                    shown[fp] = here[fp]
                    out.append(_bubble(msg, s.key))
    return out


@dataclass(frozen=True)
class ModelUsage:
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float | None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_by_model(run: RunRecord, steps: Mapping[str, StepRecord]) -> list[ModelUsage]:
    """Tokens (and cost, when a provider recorded one) per model, from the
    usage model replies carry in ``meta``, each reply counted once by id."""
    seen: set[str] = set()
    totals: dict[str, list[Any]] = {}
    texts = [t for s in steps.values() for t in (s.args, s.output)] + [run.result]
    for text in texts:
        for msg in _messages(load(text)):
            meta = msg.get("meta")
            if not isinstance(meta, dict) or not isinstance(meta.get("usage"), dict):
                continue
            ident = str(msg.get("id"))
            if ident in seen:
                continue
            seen.add(ident)
            usage = meta["usage"]
            row = totals.setdefault(str(meta.get("model") or "unknown model"), [0, 0, 0, None])
            row[0] += 1
            row[1] += _int(usage.get("input_tokens"))
            row[2] += _int(usage.get("output_tokens"))
            cost = meta.get("cost", usage.get("cost"))
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                row[3] = (row[3] or 0.0) + float(cost)
    return [ModelUsage(m, *v) for m, v in sorted(totals.items())]


# -- waiting for a human ---------------------------------------------------
def pending_prompt(steps: Mapping[str, StepRecord], signal: str | None) -> str:
    """What a run waiting for ``signal`` asked, if it recorded a question.

    A record whose value is ``{"prompt": ..., "signal": signal}`` (what
    ``ctx.ask`` says) is the question; the latest one wins. Empty when the
    run recorded none: the page then shows the signal's name alone.
    """
    best: tuple[float, str] | None = None
    for s in steps.values():
        value = load(s.output)
        if isinstance(value, dict) and _TAG not in value and isinstance(value.get("prompt"), str):
            if value.get("signal", signal) != signal:
                continue
            if best is None or s.finished_at >= best[0]:
                best = (s.finished_at, value["prompt"])
    return "" if best is None else best[1]


def age(ts: float, now: float | None = None) -> str:
    """How long ago ``ts`` was, for "waiting since"."""
    return fmt_duration((now if now is not None else time.time()) - ts)
