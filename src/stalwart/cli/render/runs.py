"""Runs as rich renderables: the table of ``runs list``, the header of ``runs show``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ...core.inputs import inputs_by_name
from ...core.ledger import TERMINAL, RunRecord
from ...core.message import Message
from ...core.policy import Policy
from ...core.redact import printable
from ...core.tags import decode_tags
from ...timetravel.move import MOVING, moved_to
from .times import relative, when
from .values import error_text, is_messages, message_line, stored, value_text

__all__ = [
    "STATUS_STYLE",
    "run_header",
    "run_status_text",
    "runs_table",
    "status_text",
    "tags_text",
    "waiting_text",
]

STATUS_STYLE = {
    "pending": "dim",
    "running": "blue",
    "suspended": "magenta",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
    "moved": "cyan",
}


def status_text(status: str) -> Text:
    return Text(printable(status), style=STATUS_STYLE.get(status, ""))


def run_status_text(rec: RunRecord) -> Text:
    """A run's status, ``moved`` for one moved to another store
    (:func:`~stalwart.timetravel.moved_to`), ``cancelled`` as it is stored
    otherwise."""
    return status_text("moved" if moved_to(rec) is not None else rec.status)


def waiting_text(rec: RunRecord) -> Text:
    """Why a run is not moving: the signal it waits for, its wake time, its holder."""
    out = Text()
    where = moved_to(rec)
    if where is not None:
        out.append(printable(f"moved to {where}"), style="cyan")
    elif rec.status == "suspended" and rec.waiting_for == MOVING:
        out.append("being moved to another store", style="cyan")
    elif rec.status == "suspended":
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


def tags_text(rec: RunRecord) -> Text:
    """A run's tags as ``key=value`` words: ledger data, printable text, never markup."""
    return Text(printable(" ".join(f"{k}={v}" for k, v in decode_tags(rec.tags).items())))


def runs_table(
    runs: Iterable[RunRecord], title: str, stranded: Mapping[str, str | None] | None = None
) -> Table:
    """The runs, one a row; ``title`` is plain text (it may quote a store URL);
    a run in ``stranded`` with a reason says it under its status; a ``tags``
    column when any of them has tags."""
    runs = list(runs)
    tagged = any(rec.tags for rec in runs)
    table = Table(title=Text(printable(title)), title_justify="left", header_style="bold")
    table.add_column("id", no_wrap=True)
    table.add_column("policy", overflow="fold", min_width=14)
    table.add_column("status", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("waiting for / wakes", overflow="fold", min_width=12)
    if tagged:
        table.add_column("tags", overflow="fold", min_width=10)
    for rec in runs:
        why = (stranded or {}).get(rec.id)
        status = run_status_text(rec)
        if why is not None:
            status = Text.assemble(
                status, "\n", Text("stranded: ", style="bold red"), printable(why)
            )
        cells: list[Text | str] = [
            Text(printable(rec.id)),
            Text(printable(rec.policy)),
            status,
            when(rec.created_at),
            when(rec.updated_at),
            waiting_text(rec),
        ]
        table.add_row(*cells, *([tags_text(rec)] if tagged else []))
    return table


def _inputs_text(inputs: str, limit: int | None, policy: Policy[Any, Any] | None) -> Text:
    """``a, b, k=v`` as recorded, or ``x=a, y=b, k=v`` when the run's
    ``policy`` is known here (:func:`~stalwart.core.inputs.inputs_by_name`)."""
    data = stored(inputs)
    named = inputs_by_name(data, policy)
    if named is not None:
        return Text(
            printable(", ".join(f"{k}={value_text(v, limit)}" for k, v in named.items()))
            or "(none)"
        )
    args, kwargs = (data.get("args"), data.get("kwargs")) if isinstance(data, dict) else (0, 0)
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return Text(value_text(data, limit))
    parts = [value_text(a, limit) for a in args]
    parts += [f"{k}={value_text(v, limit)}" for k, v in kwargs.items()]
    return Text(printable(", ".join(parts)) or "(none)")


def run_header(
    rec: RunRecord,
    *,
    limit: int | None = 200,
    policy: Policy[Any, Any] | None = None,
    stranded: str | None = None,
) -> Panel:
    """A run's header; its inputs by parameter name when ``policy`` (the
    one the run names) is known here; why it is ``stranded``, if it is."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("status", run_status_text(rec))
    grid.add_row("policy", Text(printable(rec.policy)))
    grid.add_row("code version", Text(printable(rec.code_version or "-")))
    if stranded is not None:
        grid.add_row(Text("stranded", style="bold red"), Text(printable(stranded)))
    grid.add_row("created", when(rec.created_at))
    grid.add_row("updated", when(rec.updated_at))
    waiting = waiting_text(rec)
    if waiting:
        grid.add_row("waiting", waiting)
    if rec.status == "running" and rec.lease_expires_at is not None:
        lease = f"{when(rec.lease_expires_at)} (fence {rec.fence})"
        grid.add_row("lease until", Text(printable(lease)))
    if decode_tags(rec.tags):
        grid.add_row("tags", tags_text(rec))
    grid.add_row("inputs", _inputs_text(rec.inputs, limit, policy))
    body: list[RenderableType] = [grid]
    if rec.status == "succeeded":
        value = stored(rec.result)
        if isinstance(value, Message) or is_messages(value):
            grid.add_row("result", "")
            msgs = [value] if isinstance(value, Message) else value
            body.extend(message_line(m, limit) for m in msgs)
        else:
            grid.add_row("result", Text(value_text(value, None), style="green"))
    elif rec.error:
        grid.add_row("error", Text(error_text(rec.error), style="red"))
    title = Text(printable(f"run {rec.id}"), style="bold")
    return Panel(Group(*body), title=title, title_align="left")
