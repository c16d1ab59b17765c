"""Runs, steps and pending decisions as plain JSON data: what ``--json`` prints.

The field names here are a contract with scripts (``docs/cli.md`` lists
them): add fields, never rename or drop one. Recorded values are given as
the ledger holds them, parsed with :func:`json.loads` and nothing more: a
codec tag (``{"$t": ..., "v": ...}``) stays a tag, no class is looked up,
nothing is imported (S13). A column that is not JSON (a corrupted or
hand-edited row) is given as its text, and its field is named in
``unreadable``, so a script can tell the two apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...core.errors import CLIError
from ...core.ledger import ASKED, RunRecord, StepRecord
from ...core.tags import decode_tags

__all__ = [
    "STATUSES",
    "Asked",
    "asked_of",
    "cursor_of",
    "parse_cursor",
    "run_data",
    "step_cursor",
    "step_data",
]

STATUSES = ("pending", "running", "suspended", "succeeded", "failed", "cancelled")

_ASKED_NAME = f"stalwart.{ASKED}"


def _parsed(text: str | None, field: str, unreadable: list[str]) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        unreadable.append(field)
        return text


def run_data(
    rec: RunRecord, *, values: bool = False, stranded: str | None = None
) -> dict[str, Any]:
    """A run's row; with ``values``, its inputs, result and error too;
    ``stranded``, why no live worker can continue it (:mod:`stalwart.runner.routing`)."""
    data: dict[str, Any] = {
        "id": rec.id,
        "policy": rec.policy,
        "status": rec.status,
        "queue": rec.queue,
        "priority": rec.priority,
        "parent_id": rec.parent_id,
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
        "code_version": rec.code_version,
        "waiting_for": rec.waiting_for,
        "wake_at": rec.wake_at,
        "owner": rec.owner,
        "lease_expires_at": rec.lease_expires_at,
        "cancel_requested": rec.cancel_requested,
        "tags": decode_tags(rec.tags),
        "stranded": stranded,
    }
    if values:
        unreadable: list[str] = []
        data["inputs"] = _parsed(rec.inputs, "inputs", unreadable)
        data["result"] = _parsed(rec.result, "result", unreadable)
        data["error"] = _parsed(rec.error, "error", unreadable)
        data["unreadable"] = unreadable
    return data


def step_data(step: StepRecord) -> dict[str, Any]:
    """A recorded step: its identity, its output or error, its timings."""
    unreadable: list[str] = []
    return {
        "key": step.key,
        "name": step.name,
        "kind": step.kind,
        "args": _parsed(step.args, "args", unreadable),
        "output": _parsed(step.output, "output", unreadable) if step.error is None else None,
        "error": _parsed(step.error, "error", unreadable),
        "attempts": step.attempts,
        "started_at": step.started_at,
        "finished_at": step.finished_at,
        "unreadable": unreadable,
    }


@dataclass(frozen=True, slots=True)
class Asked:
    """What a waiting run asks: its prompt and details, as recorded."""

    prompt: str | None
    about: Any
    key: str


def asked_of(steps: Iterable[StepRecord], signal: str) -> Asked | None:
    """The latest record of what a wait for ``signal`` asks, if the run wrote one.

    Runs that waited on code older than these records, or waits that
    attach nothing, have none.
    """
    best: tuple[float, str, Asked] | None = None
    for step in steps:
        if step.name != _ASKED_NAME or step.output is None or step.error is not None:
            continue
        try:
            value = json.loads(step.output)
        except (ValueError, RecursionError):
            continue
        if not isinstance(value, Mapping) or value.get("signal") != signal:
            continue
        prompt = value.get("prompt")
        found = Asked(prompt if isinstance(prompt, str) else None, value.get("about"), step.key)
        if best is None or (step.finished_at, step.key) >= best[:2]:
            best = (step.finished_at, step.key, found)
    return None if best is None else best[2]


def cursor_of(rec: RunRecord) -> str:
    """Where the next page of ``runs list`` starts: after this run.

    Opaque to scripts (pass it back to ``--before``); it is the run's
    ``created_at`` and id, the order runs are listed in.
    """
    return f"{rec.created_at!r}/{rec.id}"


def step_cursor(step: StepRecord) -> str:
    """Where the page of ``runs show`` before this step ends: its finish
    time and key, the order steps are shown in. Read by :func:`parse_cursor`."""
    return f"{step.finished_at!r}/{step.key}"


def parse_cursor(text: str, command: str = "stalwart runs list") -> tuple[float, str]:
    """A cursor from :func:`cursor_of` (or :func:`step_cursor`), or a usage
    error saying where to get one."""
    stamp, sep, run_id = text.partition("/")
    try:
        if not sep:
            raise ValueError(text)
        return float(stamp), run_id
    except ValueError:
        raise CLIError(
            f"cannot read the cursor {text!r}: pass the `next` value a previous "
            f"`{command}` printed",
            code=2,
        ) from None
