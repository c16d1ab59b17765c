"""Where new code leaves a recorded run, and the report a replay test shows.

A replay test is only as useful as its failure message: it names the step,
says what kind of divergence it is, and shows both sides, down to the first
differing path inside a whole conversation. The comparisons here read
recorded JSON only, and leave message ids out (they are random per
execution), so a run reproduced by the new code compares equal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..core import codec
from ..core.engine.identity import step_hash
from ..core.errors import NonDeterminismError
from ..core.ledger import RunRecord
from ..core.recorded import error_to_json
from ..timetravel.keys import is_ancestor, key_parts
from .recording import Recording

__all__ = [
    "Divergence",
    "ReplayReport",
    "call_text",
    "first_missing",
    "mismatch",
    "outcome_divergences",
    "same_value",
]


@dataclass(frozen=True)
class Divergence:
    """Where the new code left the record.

    ``kind``: ``"name"`` (another policy at that step), ``"arguments"``,
    ``"order"`` (a call the record has at another step), ``"extra"`` (a call
    or record the recording does not have), ``"missing"`` (a recorded step
    the new code never made), ``"outcome"`` (another result or error), or
    ``"error"`` (the replay could not go on: a record that cannot be read).
    """

    kind: str
    key: str
    recorded: str | None
    now: str | None
    note: str = ""

    def describe(self) -> str:
        lines = [f"step {self.key or '(run)'}: {_KINDS.get(self.kind, self.kind)}"]
        if self.note:
            lines.append(f"    {self.note}")
        if self.recorded is not None:
            lines.append(f"    recorded: {self.recorded}")
        if self.now is not None:
            lines.append(f"    now:      {self.now}")
        return "\n".join(lines)


_KINDS = {
    "name": "the new code calls another policy",
    "arguments": "the new code passes other arguments",
    "order": "the new code makes its calls in another order",
    "extra": "the new code does something the recording does not have",
    "missing": "the recording has a step the new code never made",
    "record": "the new code records another value",
    "outcome": "the run ends differently",
    "error": "the replay cannot go on",
}


@dataclass
class ReplayReport:
    """What a replay found. True when the new code reproduces the run, so
    ``assert replay(...)`` fails with this report as its message."""

    run_id: str
    source: str
    policy: str
    divergences: list[Divergence]
    replayed: list[str]
    ended_at: str | None = None  # where an unfinished recording ends

    @property
    def ok(self) -> bool:
        return not self.divergences

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"replay of run {self.run_id!r} ({self.source}) with {self.policy}"
        if self.ok:
            tail = f"; the recording ends at step {self.ended_at}" if self.ended_at else ""
            return f"{head}: reproduces the run ({len(self.replayed)} steps replayed{tail})"
        first = self.divergences[0]
        lines = [f"{head}: DIVERGES at step {first.key or '(run)'}"]
        lines += [d.describe() for d in self.divergences]
        lines.append(
            f"  {len(self.replayed)} steps replayed before: {', '.join(self.replayed[-8:])}"
        )
        return "\n".join(lines)

    __repr__ = __str__

    def check(self) -> None:
        """Raise AssertionError with the report unless the run is reproduced."""
        if not self.ok:
            raise AssertionError(str(self))


def call_text(name: str, args: str | None) -> str:
    """A call as a report shows it, ``name(args)``: the same on both sides
    of a divergence, so a reader compares like with like."""
    return f"{name}({args or ''})"


_NOW = re.compile(r"^\s*now:\s+(.*?)\((.*)\)\s*$", re.M)


def mismatch(err: NonDeterminismError, rec: Recording, key: str) -> Divergence:
    """A step whose record is another call: which kind of divergence it is.
    The engine says only that the call differs; a reader needs to know
    whether the policy, its arguments or the order of calls changed."""
    recorded = rec.steps.get(key)
    found = _NOW.search(str(err))
    if recorded is None or found is None:
        return Divergence("name", key, None, None, str(err))
    name, args = found.group(1), found.group(2)
    was = call_text(recorded.name, recorded.args)
    now = call_text(name, args)
    digest = step_hash(args) if args else ""
    for other in rec.steps.values():
        if other.key != key and other.name == name and other.args_hash == digest:
            note = f"the record has this call at step {other.key}"
            return Divergence("order", key, was, now, note)
    if name != recorded.name:
        return Divergence("name", key, was, now)
    return Divergence("arguments", key, was, now, _first_difference(recorded.args, args))


def _first_difference(recorded: str | None, now: str) -> str:
    """Where two recorded argument lists first differ, as a path: the line
    a reader needs when the arguments are a whole conversation."""
    try:
        a, b = json.loads(recorded or "{}"), json.loads(now or "{}")
    except ValueError:
        return ""
    found = _diff(_plain(a), _plain(b), "")
    if found is None:
        return ""
    path, x, y = found
    return f"first difference at {path or 'the top'}: recorded {_short(x)}, now {_short(y)}"


def _diff(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("$t") == "msg" and b.get("$t") == "msg":
            return _diff(a.get("v"), b.get("v"), path)
        for k in [*a, *(k for k in b if k not in a)]:
            if k not in a or k not in b:
                return f"{path}[{k!r}]", a.get(k, "(absent)"), b.get(k, "(absent)")
            found = _diff(a[k], b[k], f"{path}[{k!r}]")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _diff(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        if len(a) != len(b):
            return f"{path} (length)", len(a), len(b)
        return None
    return None if a == b else (path, a, b)


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def first_missing(rec: Recording, seen: list[str]) -> list[Divergence]:
    """The first recorded call after the last one the new code made: it
    stopped early. (A record skipped in between shows as a divergence at
    the next call, or in the outcome.)"""
    looked = set(seen)
    last = max((key_parts(k) for k in looked), default=())
    out = []
    for key in sorted(rec.steps, key=key_parts):
        if key in looked or key_parts(key) < last or rec.steps[key].kind != "call":
            continue  # the engine's own records (time, signals, a flow's journal) are read in bulk
        if any(is_ancestor(k, key) for k in looked):
            continue  # answered by an enclosing step's record
        step = rec.steps[key]
        out.append(Divergence("missing", key, call_text(step.name, step.args), None))
        break  # the first is what a reader needs
    return out


def outcome_divergences(run: RunRecord, outcome: tuple[str, Any]) -> list[Divergence]:
    """How the replayed run ended (``("succeeded", result)`` or
    ``("failed", exception)``) against how the recorded run ended: an
    error counts as the same by its type and message, as recorded."""
    status, value = outcome
    if status == "succeeded":
        now = codec.dumps(value, "result of the replay")
        if run.status == "succeeded" and same_value(run.result, now):
            return []
        return [Divergence("outcome", "", _ending(run), f"succeeded: {now}")]
    err = json.loads(error_to_json(value))
    if run.status == "failed" and run.error is not None:
        was = json.loads(run.error)
        if (was.get("type"), was.get("message")) == (err.get("type"), err.get("message")):
            return []
    return [
        Divergence("outcome", "", _ending(run), f"failed: {err.get('type')}: {err.get('message')}")
    ]


def _ending(run: RunRecord) -> str:
    if run.status == "succeeded":
        return f"succeeded: {run.result}"
    return f"{run.status}: {run.error}"


def same_value(a: str | None, b: str) -> bool:
    """Whether two recorded JSON texts hold the same value, message ids
    left out: they are random per execution, so a reproduced run would
    otherwise never compare equal. Text that is not JSON compares as text."""
    try:
        return bool(_plain(json.loads(a or "null")) == _plain(json.loads(b)))
    except ValueError:
        return a == b


def _plain(tree: Any) -> Any:
    """A recorded value with message ids left out (random per execution)."""
    if isinstance(tree, list):
        return [_plain(v) for v in tree]
    if isinstance(tree, dict):
        if tree.get("$t") == "msg" and isinstance(tree.get("v"), dict):
            return {"$t": "msg", "v": {k: _plain(v) for k, v in tree["v"].items() if k != "id"}}
        return {k: _plain(v) for k, v in tree.items()}
    return tree
