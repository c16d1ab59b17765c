"""Turning runs and steps into rich renderables.

Everything here reads records as they are stored (JSON text). A value that
cannot be decoded (its class lives in an application module that is not
importable here) is shown as its raw JSON rather than failing the command:
inspecting a ledger must work from anywhere.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .. import codec
from ..message import Message
from ..store.base import TERMINAL, RunRecord, StepRecord

__all__ = [
    "STATUS_STYLE",
    "error_text",
    "message_line",
    "run_header",
    "runs_table",
    "short",
    "status_text",
    "steps_tree",
    "value_text",
    "when",
]

STATUS_STYLE = {
    "pending": "dim",
    "running": "blue",
    "suspended": "magenta",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
}

_UNDECODED = object()


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def when(ts: float | None) -> str:
    """Local time, to the second; dates matter for runs that wait for days."""
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def relative(ts: float, now: float | None = None) -> str:
    delta = ts - (time.time() if now is None else now)
    span = _span(abs(delta))
    return f"in {span}" if delta >= 0 else f"{span} ago"


def _span(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"
    return f"{seconds // 86400:.0f}d{seconds % 86400 // 3600:.0f}h"


def duration(seconds: float) -> str:
    if seconds < 0.001:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"


def short(text: str, limit: int | None) -> str:
    """One line, at most ``limit`` characters (None: no limit)."""
    text = " ".join(text.split()) if limit is not None else text
    if limit is None or len(text) <= limit:
        return text
    return text[: max(1, limit - 1)] + "…"


def decode(text: str | None) -> Any:
    """The recorded value, or _UNDECODED when its types cannot be rebuilt here."""
    if text is None:
        return None
    try:
        return codec.loads(text)
    except Exception:
        return _UNDECODED


def error_text(error_json: str) -> str:
    """``Type: message`` of a recorded error, without importing its type."""
    try:
        data = json.loads(error_json)
        type_name = str(data.get("type", "Error")).rpartition(".")[2]
        return f"{type_name}: {data.get('message', '')}"
    except (ValueError, AttributeError):
        return error_json


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, Message) for m in value)


def value_text(value: Any, limit: int | None = 100) -> str:
    """A value in one line: messages as counts, strings as they are."""
    if value is _UNDECODED:
        return "(recorded value with types not importable here)"
    if isinstance(value, Message):
        return short(_message_plain(value), limit)
    if _is_messages(value):
        return f"[{len(value)} messages]"
    if isinstance(value, str):
        return short(value, limit)
    return short(_plain_repr(value), limit)


def _plain_repr(value: Any) -> str:
    try:
        return json.dumps(_jsonable(value), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Message):
        return _message_plain(value)
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def _message_plain(m: Message) -> str:
    return message_line(m, None).plain


def message_line(m: Message, limit: int | None = 100) -> Text:
    """role (actor): text, → call(args), or ← result, as a reader wants them."""
    who = m.role if m.actor in (m.role, "") else f"{m.role} ({m.actor})"
    line = Text(who, style="bold")
    if m.action_call is not None:
        c = m.action_call
        args = ", ".join(f"{k}={_plain_repr(v)}" for k, v in c.arguments.items())
        line.append(" → ", style="cyan")
        line.append(short(f"{c.name}({args})", limit), style="cyan")
        line.append(f"  [{c.id}]", style="dim")
        if c.invalid:
            line.append(f"  invalid arguments: {short(c.invalid, limit)}", style="red")
        return line
    if m.action_result is not None:
        r = m.action_result
        line.append(" ← ", style="green" if not r.is_error else "red")
        if r.is_error:
            line.append(short(f"{r.error_type}: {r.error_message}", limit), style="red")
        else:
            line.append(short(m.text, limit))
        line.append(f"  [{r.call_id}]", style="dim")
        return line
    line.append(": ")
    line.append(short(m.text, limit))
    if m.media:
        line.append(f"  (+{len(m.media)} media)", style="dim")
    return line


# -- runs --------------------------------------------------------------------------
def waiting_text(rec: RunRecord) -> Text:
    """Why a run is not moving: the signal it waits for, its wake time, its holder."""
    out = Text()
    if rec.status == "suspended":
        if rec.waiting_for:
            out.append(f"signal {rec.waiting_for!r}")
        if rec.wake_at is not None:
            if out:
                out.append(", ")
            label = "deadline" if rec.waiting_for else "wakes"
            out.append(f"{label} {when(rec.wake_at)} ({relative(rec.wake_at)})")
    elif rec.status == "running" and rec.owner:
        out.append(f"held by {rec.owner}", style="dim")
    if rec.cancel_requested and rec.status not in TERMINAL:
        if out:
            out.append(", ")
        out.append("cancel requested", style="yellow")
    return out


def runs_table(runs: Iterable[RunRecord], title: str) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("id", no_wrap=True)
    table.add_column("policy", overflow="fold", min_width=14)
    table.add_column("status", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("waiting for / wakes", overflow="fold", min_width=12)
    for rec in runs:
        table.add_row(
            Text(rec.id),
            Text(rec.policy),
            status_text(rec.status),
            when(rec.created_at),
            when(rec.updated_at),
            waiting_text(rec),
        )
    return table


def _inputs_text(inputs: str, limit: int | None) -> Text:
    data = decode(inputs)
    if not isinstance(data, dict):
        return Text(short(inputs, limit))
    parts = [value_text(a, limit) for a in data.get("args", [])]
    parts += [f"{k}={value_text(v, limit)}" for k, v in data.get("kwargs", {}).items()]
    return Text(", ".join(parts) or "(none)")


def run_header(rec: RunRecord, *, limit: int | None = 200) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("status", status_text(rec.status))
    grid.add_row("policy", Text(rec.policy))
    grid.add_row("code version", Text(rec.code_version or "-"))
    grid.add_row("created", when(rec.created_at))
    grid.add_row("updated", when(rec.updated_at))
    waiting = waiting_text(rec)
    if waiting:
        grid.add_row("waiting", waiting)
    if rec.status == "running" and rec.lease_expires_at is not None:
        grid.add_row("lease until", f"{when(rec.lease_expires_at)} (fence {rec.fence})")
    grid.add_row("inputs", _inputs_text(rec.inputs, limit))
    body: list[RenderableType] = [grid]
    if rec.status == "succeeded":
        value = decode(rec.result)
        if isinstance(value, Message) or _is_messages(value):
            grid.add_row("result", "")
            msgs = [value] if isinstance(value, Message) else value
            body.extend(message_line(m, limit) for m in msgs)
        else:
            grid.add_row("result", Text(value_text(value, None), style="green"))
    elif rec.error:
        grid.add_row("error", Text(error_text(rec.error), style="red"))
    return Panel(Group(*body), title=Text(f"run {rec.id}", style="bold"), title_align="left")


# -- steps -------------------------------------------------------------------------
_SEP = re.compile(r"[.#@]")
_RANK = {".": 0, "@": 1, "#": 2}


def parent_key(key: str) -> str:
    """The parent of a key: 1.2 → 1, 3#1 → 3, 1@2.1 → 1@2 (attempt 2 of 1), 4 → root."""
    cut = max((m.start() for m in _SEP.finditer(key)), default=-1)
    return key[:cut] if cut >= 0 else ""


def _sibling_order(key: str) -> tuple[int, int, str]:
    cut = max((m.start() for m in _SEP.finditer(key)), default=-1)
    sep, tail = (key[cut], key[cut + 1 :]) if cut >= 0 else (".", key)
    return (_RANK[sep], int(tail) if tail.isdigit() else 0, key)


def _args_text(args: str | None, limit: int | None) -> str:
    if args is None:
        return ""
    data = decode(args)
    if not isinstance(data, dict):
        return short(args, limit)
    parts = []
    for a in data.get("*", []):
        parts.append(_arg(a, limit))
    for k, v in data.items():
        if k != "*":
            parts.append(f"{k}={_arg(v, limit)}")
    return short(", ".join(parts), limit)


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
        return repr(short(value, limit))
    return value_text(value, limit)


def _step_label(step: StepRecord, limit: int | None) -> tuple[Text, Any]:
    label = Text()
    label.append(step.key, style="bold cyan")
    label.append("  ")
    value = decode(step.output) if step.error is None else None
    if step.kind != "call":
        kind = step.name.removeprefix("stalwart.")
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
    label.append(step.name, style="bold")
    args = _args_text(step.args, limit)
    label.append(f"({args})", style="dim")
    label.append(f"  {duration(max(0.0, step.finished_at - step.started_at))}", style="dim")
    if step.attempts > 1:
        label.append(f"  {step.attempts} attempts", style="yellow")
    if step.error is not None:
        label.append("  ✗ " + short(error_text(step.error), limit), style="red")
        return label, None
    if isinstance(value, Message) or _is_messages(value):
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
    root = Tree(Text(title, style="bold"))

    def add(node: Tree, key: str) -> None:
        step = by_key.get(key)
        if step is None:
            attempt = key.rpartition("@")[2] if "@" in key else ""
            note = f"attempt {attempt}" if attempt.isdigit() else "no record: in flight, or ended"
            branch = node.add(Text.assemble((key, "bold cyan"), "  ", (note, "dim italic")))
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
