"""Turning runs and steps into rich renderables.

Everything here reads records as they are stored: JSON text, parsed with
``json.loads`` and shown as data. Nothing read from a ledger is decoded into
an application type (S13): a tagged dataclass, model or enum shows as its
type's name and its fields (``Point(x=1, y=2)``), and messages are rebuilt
from their fields by hand, never through the codec, so inspecting a ledger
imports nothing and works from anywhere. Every string that came from the
ledger passes through :func:`~stalwart.core.redact.printable` before it reaches
the terminal, and is put in ``Text`` objects, never in markup.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..core.ledger import TERMINAL, RunRecord, StepRecord
from ..core.message import ActionCall, ActionResult, Media, Message
from ..core.message import Text as TextPart
from ..core.redact import printable

__all__ = [
    "STATUS_STYLE",
    "Typed",
    "Unreadable",
    "error_text",
    "message_line",
    "plain",
    "run_header",
    "runs_table",
    "short",
    "status_text",
    "steps_tree",
    "stored",
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


@dataclass(frozen=True, slots=True)
class Typed:
    """A recorded value of an application type: its type's name and its data.

    Shown, never rebuilt: the class a row names is only a string here.
    """

    name: str
    value: Any


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A column that is not JSON (a corrupted or hand-edited row): shown as text."""

    text: str


def stored(text: str | None) -> Any:
    """The value a JSON column holds, as data to show (see :func:`plain`)."""
    if text is None:
        return None
    try:
        return plain(json.loads(text))
    except (ValueError, RecursionError):
        return Unreadable(text)


def plain(tree: Any) -> Any:
    """A codec JSON tree as plain data for a reader, without the codec.

    Tuples and sets read as lists; datetimes, dates and UUIDs as their
    text; a tagged dataclass, model or enum (or a tag this version does not
    know) as :class:`Typed`; a message as a :class:`Message` rebuilt from
    its fields, holding plain data. Strings stay as stored: they are made
    printable where they are shown.
    """
    if isinstance(tree, list):
        return [plain(v) for v in tree]
    if isinstance(tree, dict):
        tag = tree.get("$t")
        if isinstance(tag, str) and "v" in tree:
            return _tagged(tag, tree)
        return {str(k): plain(v) for k, v in tree.items()}
    return tree  # a string, a number, a bool or None


def _tagged(tag: str, tree: dict[str, Any]) -> Any:
    value = plain(tree["v"])
    if tag in ("dict", "tuple", "set", "frozenset", "datetime", "date", "uuid"):
        return value
    if tag == "map" and isinstance(value, list):
        pairs = [p for p in value if isinstance(p, list) and len(p) == 2]
        return {k if isinstance(k, str) else _text(k): v for k, v in pairs}
    if tag == "bytes" and isinstance(value, str):  # base64: 4 characters for 3 bytes
        return f"<{len(value) * 3 // 4 - value.count('=')} bytes>"
    if tag == "msg" and isinstance(value, dict):
        return _message(value) or Typed("Message", value)
    name = tree.get("c")
    label = name.rpartition(":")[2] if isinstance(name, str) else ""
    return Typed(label or tag, value)


def _message(d: dict[str, Any]) -> Message | None:
    """A recorded message from its fields (already plain), or None if it is not one."""
    try:
        parts = tuple(
            TextPart(str(p["text"])) if p.get("type") == "text" else _media(p)
            for p in d.get("parts", ())
        )
        call = result = None
        if isinstance(c := d.get("call"), dict):
            args = c.get("arguments")
            call = ActionCall(
                str(c["id"]),
                str(c["name"]),
                args if isinstance(args, dict) else {},
                c.get("invalid"),
            )
        if isinstance(r := d.get("result"), dict):
            result = ActionResult(
                str(r["call_id"]),
                str(r["name"]),
                r.get("value"),
                r.get("error_type"),
                r.get("error_message"),
            )
        return Message(d["role"], str(d["actor"]), parts, call, result, str(d.get("id", "")))
    except (KeyError, TypeError, AttributeError, ValueError):
        return None


def _media(part: dict[str, Any]) -> Media:
    """A media part for counting; its data is not decoded (it is never shown)."""
    url = part.get("url")
    return Media(str(part.get("mime_type", "")), None if url else b"", str(url) if url else None)


def status_text(status: str) -> Text:
    return Text(printable(status), style=STATUS_STYLE.get(status, ""))


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


def error_text(error_json: str) -> str:
    """``Type: message`` of a recorded error, without importing its type."""
    try:
        data = json.loads(error_json)
        type_name = str(data.get("type", "Error")).rpartition(".")[2]
        return printable(f"{type_name}: {data.get('message', '')}")
    except (ValueError, AttributeError, RecursionError):
        return printable(error_json)


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, Message) for m in value)


def value_text(value: Any, limit: int | None = 100) -> str:
    """A value in one line: messages as counts, strings as they are."""
    if isinstance(value, Unreadable):
        return short(printable(f"(not JSON) {value.text}"), limit)
    if isinstance(value, Message):
        return short(_message_plain(value), limit)
    if _is_messages(value):
        return f"[{len(value)} messages]"
    if isinstance(value, str):
        return short(printable(value), limit)
    return short(_text(value), limit)


def _text(value: Any) -> str:
    """A value as JSON-like text; an application value as ``Name(field=...)``."""
    if isinstance(value, Typed):
        name = printable(value.name)
        if isinstance(value.value, dict):
            fields = ", ".join(f"{printable(k)}={_text(v)}" for k, v in value.value.items())
            return f"{name}({fields})"
        return f"{name}({_text(value.value)})"
    if isinstance(value, Message):
        return _json(_message_plain(value))
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json(str(k))}: {_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Unreadable):
        return printable(value.text)
    return _json(value)


def _json(value: Any) -> str:
    """A JSON scalar as JSON text, printable (JSON escapes C0 controls, not C1)."""
    try:
        return printable(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return printable(repr(value))


def _message_plain(m: Message) -> str:
    return message_line(m, None).plain


def message_line(m: Message, limit: int | None = 100) -> Text:
    """role (actor): text, → call(args), or ← result, as a reader wants them."""
    who = m.role if m.actor in (m.role, "") else f"{m.role} ({m.actor})"
    line = Text(printable(who), style="bold")
    if m.action_call is not None:
        c = m.action_call
        args = ", ".join(f"{k}={_text(v)}" for k, v in c.arguments.items())
        line.append(" → ", style="cyan")
        line.append(printable(short(f"{c.name}({args})", limit)), style="cyan")
        line.append(printable(f"  [{c.id}]"), style="dim")
        if c.invalid:
            invalid = short(str(c.invalid), limit)
            line.append(printable(f"  invalid arguments: {invalid}"), style="red")
        return line
    if m.action_result is not None:
        r = m.action_result
        line.append(" ← ", style="green" if not r.is_error else "red")
        if r.is_error:
            line.append(printable(short(f"{r.error_type}: {r.error_message}", limit)), style="red")
        else:
            line.append(short(_result_text(m, r), limit))
        line.append(printable(f"  [{r.call_id}]"), style="dim")
        return line
    line.append(": ")
    line.append(printable(short(m.text, limit)))
    if m.media:
        line.append(f"  (+{len(m.media)} media)", style="dim")
    return line


def _result_text(m: Message, r: ActionResult) -> str:
    """What a model read for a result, from the plain recorded value."""
    if m.parts:
        return printable(m.text)
    if isinstance(r.value, str):
        return printable(r.value)
    if isinstance(r.value, Message):
        return printable(r.value.text)
    return _text(r.value)


# -- runs --------------------------------------------------------------------------
def waiting_text(rec: RunRecord) -> Text:
    """Why a run is not moving: the signal it waits for, its wake time, its holder."""
    out = Text()
    if rec.status == "suspended":
        if rec.waiting_for:
            out.append(printable(f"signal {rec.waiting_for!r}"))
        if rec.wake_at is not None:
            if out:
                out.append(", ")
            label = "deadline" if rec.waiting_for else "wakes"
            out.append(f"{label} {when(rec.wake_at)} ({relative(rec.wake_at)})")
    elif rec.status == "running" and rec.owner:
        out.append(printable(f"held by {rec.owner}"), style="dim")
    if rec.cancel_requested and rec.status not in TERMINAL:
        if out:
            out.append(", ")
        out.append("cancel requested", style="yellow")
    return out


def runs_table(runs: Iterable[RunRecord], title: str) -> Table:
    """The runs, one a row; ``title`` is plain text (it may quote a store URL)."""
    table = Table(title=Text(printable(title)), title_justify="left", header_style="bold")
    table.add_column("id", no_wrap=True)
    table.add_column("policy", overflow="fold", min_width=14)
    table.add_column("status", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("waiting for / wakes", overflow="fold", min_width=12)
    for rec in runs:
        table.add_row(
            Text(printable(rec.id)),
            Text(printable(rec.policy)),
            status_text(rec.status),
            when(rec.created_at),
            when(rec.updated_at),
            waiting_text(rec),
        )
    return table


def _inputs_text(inputs: str, limit: int | None) -> Text:
    data = stored(inputs)
    args, kwargs = (data.get("args"), data.get("kwargs")) if isinstance(data, dict) else (0, 0)
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return Text(value_text(data, limit))
    parts = [value_text(a, limit) for a in args]
    parts += [f"{k}={value_text(v, limit)}" for k, v in kwargs.items()]
    return Text(printable(", ".join(parts)) or "(none)")


def run_header(rec: RunRecord, *, limit: int | None = 200) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("status", status_text(rec.status))
    grid.add_row("policy", Text(printable(rec.policy)))
    grid.add_row("code version", Text(printable(rec.code_version or "-")))
    grid.add_row("created", when(rec.created_at))
    grid.add_row("updated", when(rec.updated_at))
    waiting = waiting_text(rec)
    if waiting:
        grid.add_row("waiting", waiting)
    if rec.status == "running" and rec.lease_expires_at is not None:
        lease = f"{when(rec.lease_expires_at)} (fence {rec.fence})"
        grid.add_row("lease until", Text(printable(lease)))
    grid.add_row("inputs", _inputs_text(rec.inputs, limit))
    body: list[RenderableType] = [grid]
    if rec.status == "succeeded":
        value = stored(rec.result)
        if isinstance(value, Message) or _is_messages(value):
            grid.add_row("result", "")
            msgs = [value] if isinstance(value, Message) else value
            body.extend(message_line(m, limit) for m in msgs)
        else:
            grid.add_row("result", Text(value_text(value, None), style="green"))
    elif rec.error:
        grid.add_row("error", Text(error_text(rec.error), style="red"))
    title = Text(printable(f"run {rec.id}"), style="bold")
    return Panel(Group(*body), title=title, title_align="left")


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
