"""Steps as a rich tree by key: ``1.2`` under ``1``, a dispatched call ``3#1``
under its model call ``3``, a retry attempt ``1@2`` under its step."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.text import Text
from rich.tree import Tree

from ...core.ledger import StepRecord
from ...core.message import Message
from ...core.redact import printable
from .times import duration, when
from .values import error_text, is_messages, message_line, short, stored, value_text

__all__ = ["parent_key", "steps_tree"]


_SEP = re.compile(r"[.#@]")
_RANK = {".": 0, "@": 1, "#": 2}


def parent_key(key: str) -> str:
    """The parent of a key: 1.2 → 1, 3#1 → 3, 1@2.1 → 1@2 (attempt 2 of 1), 4 → root."""
    cut = max((m.start() for m in _SEP.finditer(key)), default=-1)
    return key[:cut] if cut >= 0 else ""


def _sibling_order(key: str) -> tuple[int, int, str]:
    cut = max((m.start() for m in _SEP.finditer(key)), default=-1)
    sep, tail = (key[cut], key[cut + 1 :]) if cut >= 0 else (".", key)
    return (_RANK[sep], int(tail) if tail.isascii() and tail.isdigit() else 0, key)


def _args_text(args: str | None, limit: int | None) -> str:
    if args is None:
        return ""
    data = stored(args)
    if not isinstance(data, dict):
        return value_text(data, limit)
    parts = []
    for a in data.get("*", []):
        parts.append(_arg(a, limit))
    for k, v in data.items():
        if k != "*":
            parts.append(f"{k}={_arg(v, limit)}")
    return printable(short(", ".join(parts), limit))


def _arg(value: Any, limit: int | None) -> str:
    if isinstance(value, str) and value.startswith("<policy "):
        return value[8:-1]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, str) and v.startswith("<policy ") for v in value)
    ):
        return "[" + ", ".join(v[8:-1] for v in value) + "]"
    if isinstance(value, str):
        return printable(repr(short(value, limit)))
    return value_text(value, limit)


def _step_label(step: StepRecord, limit: int | None) -> tuple[Text, Any]:
    label = Text()
    label.append(printable(step.key), style="bold cyan")
    label.append("  ")
    value = stored(step.output) if step.error is None else None
    if step.kind != "call":
        kind = printable(step.name.removeprefix("stalwart."))
        label.append(kind, style="magenta")
        if step.error is not None:
            label.append("  ✗ " + short(error_text(step.error), limit), style="red")
        elif kind == "sleep" and isinstance(value, int | float):
            label.append(f"  until {when(value)}", style="dim")
        elif kind == "deadline":
            text = (
                "none" if value is None else when(value) if isinstance(value, int | float) else ""
            )
            label.append(f"  {text}", style="dim")
        elif kind == "now" and isinstance(value, int | float):
            label.append(f"  = {when(value)}", style="dim")
        elif not kind.startswith("patch:"):
            label.append(f"  = {value_text(value, limit)}", style="dim")
        return label, None
    label.append(printable(step.name), style="bold")
    args = _args_text(step.args, limit)
    label.append(f"({args})", style="dim")
    label.append(f"  {duration(max(0.0, step.finished_at - step.started_at))}", style="dim")
    if step.attempts > 1:
        label.append(f"  {step.attempts} attempts", style="yellow")
    if step.error is not None:
        label.append("  ✗ " + short(error_text(step.error), limit), style="red")
        return label, None
    if isinstance(value, Message) or is_messages(value):
        return label, [value] if isinstance(value, Message) else value
    label.append("  → ", style="green")
    label.append(value_text(value, limit))
    return label, None


def steps_tree(steps: Iterable[StepRecord], title: str, *, limit: int | None = 100) -> Tree:
    """The steps as a tree by key; unrecorded parents (in flight, or failed
    before recording) appear as placeholders so their children have a home."""
    by_key = {s.key: s for s in steps}
    children: dict[str, list[str]] = {}
    known: set[str] = set()
    for key in by_key:
        while key and key not in known:
            known.add(key)
            parent = parent_key(key)
            children.setdefault(parent, []).append(key)
            key = parent
    root = Tree(Text(printable(title), style="bold"))

    def add(node: Tree, key: str) -> None:
        step = by_key.get(key)
        if step is None:
            attempt = key.rpartition("@")[2] if "@" in key else ""
            note = f"attempt {attempt}" if attempt.isdigit() else "no record: in flight, or ended"
            branch = node.add(
                Text.assemble((printable(key), "bold cyan"), "  ", (note, "dim italic"))
            )
        else:
            label, messages = _step_label(step, limit)
            branch = node.add(label)
            for m in messages or ():
                branch.add(message_line(m, limit))
        for child in sorted(children.get(key, []), key=_sibling_order):
            add(branch, child)

    for key in sorted(children.get("", []), key=_sibling_order):
        add(root, key)
    return root
