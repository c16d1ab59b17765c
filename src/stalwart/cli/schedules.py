"""``stalwart schedules list | pause | resume | delete``: the store's recurring schedules.

Schedules are defined by the application (``Schedules(runner).define(...)``), which
checks their inputs against the policy's schema; these commands look at them
and switch them off and on. None of them executes a run: ticks run on
workers (``stalwart worker --app MODULE``). Everything printed from a
schedule row (its name, policy, inputs) has its terminal controls escaped.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ..core.redact import mask_url, printable
from ..schedules import Schedules
from .command import (
    DEFAULT_STORE,
    JsonOption,
    StoreOption,
    console,
    execute,
    lit,
    print_document,
    print_table,
    reading,
    runner_for,
)

__all__ = ["delete_schedule", "list_schedules", "pause_schedule", "resume_schedule"]

NameArgument = Annotated[str, typer.Argument(help="The schedule's name.", metavar="NAME")]


def list_schedules(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 1000,
    as_json: JsonOption = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """List the schedules: timing, policy, next and last tick, paused or not.

    A row that fails its checks (edited by hand) is listed as corrupt, with
    the reason, beside the sound ones; the command then exits with status 1."""

    async def go() -> int:
        async with reading(store) as ledger:
            # One more than asked: whether the limit left some out.
            found = await ledger.list_schedules(limit + 1, check=False)
        more = len(found) > limit
        found = found[:limit]
        corrupt = _corrupt(found)
        if as_json:
            rows = [_data(s, corrupt.get(id(s))) for s in found]
            print_document(store, schedules=rows, more=more)
        elif not found:
            console().print(f"no schedule in {lit(mask_url(store))}")
        else:
            print_table(_table(found, mask_url(store), corrupt))
        return 1 if corrupt else 0

    if execute(go):
        raise typer.Exit(1)


def _corrupt(found: list[Any]) -> dict[int, str]:
    """Why each row that fails its checks does, by the row's id()."""
    from ..core.errors import CorruptedRecord
    from ..stores.base import check_schedule

    out: dict[int, str] = {}
    for s in found:
        try:
            check_schedule(s)
        except CorruptedRecord as exc:
            out[id(s)] = str(exc)
    return out


def pause_schedule(name: NameArgument, store: StoreOption = DEFAULT_STORE) -> None:
    """Stop a schedule's ticks until it is resumed (runs already started go on)."""

    async def go() -> None:
        async with runner_for(store) as runner:
            await Schedules(runner).pause(name)
        console().print(f"schedule {lit(name)} paused")

    execute(go)


def resume_schedule(name: NameArgument, store: StoreOption = DEFAULT_STORE) -> None:
    """Tick again from the next tick after now (ticks while paused do not run)."""
    from .render.times import when

    async def go() -> None:
        async with runner_for(store) as runner:
            s = await Schedules(runner).resume(name)
        console().print(f"schedule {lit(name)} resumed; next tick {lit(when(s.next_at))}")

    execute(go)


def delete_schedule(name: NameArgument, store: StoreOption = DEFAULT_STORE) -> None:
    """Delete a schedule; the runs it started stay."""

    async def go() -> None:
        async with runner_for(store) as runner:
            await Schedules(runner).delete(name)
        console().print(f"schedule {lit(name)} deleted")

    execute(go)


def _timing(s: Any) -> str:
    from ..schedules import Timing

    try:
        return Timing.of_record(s).describe()
    except ValueError:  # a row edited by hand: show what it holds
        return f"cron {s.cron!r} in {s.timezone!r}" if s.cron else f"every {s.every!r} s"


def _data(s: Any, corrupt: str | None = None) -> dict[str, Any]:
    """A schedule as ``--json`` gives it: its ``inputs`` parsed, as ``runs
    show`` gives a run's (text that is not JSON stays text, and is named in
    ``unreadable``)."""
    unreadable: list[str] = []
    inputs: Any = s.inputs
    if isinstance(inputs, str):
        try:
            inputs = json.loads(inputs)
        except (ValueError, RecursionError):
            unreadable.append("inputs")
    data = {
        "name": s.name,
        "policy": s.policy,
        "inputs": inputs,
        "cron": s.cron,
        "every": s.every,
        "timezone": s.timezone,
        "missed": s.missed,
        "grace": s.grace,
        "queue": s.queue,
        "priority": s.priority,
        "next_at": s.next_at,
        "last_at": s.last_at,
        "paused": s.paused,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }
    if corrupt is not None:
        data["corrupt"] = corrupt
    data["unreadable"] = unreadable
    return {k: _json_safe(v) for k, v in data.items()}


def _json_safe(value: Any) -> Any:
    """A row's value as JSON can hold it (a hand-edited row may hold a NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _table(found: list[Any], where: str, corrupt: dict[int, str]) -> Table:
    from .render.times import relative, when

    n = len(found)
    bad = f" ({len(corrupt)} corrupt)" if corrupt else ""
    title = Text(printable(f"{n} schedule{'s' if n != 1 else ''} in {where}{bad}"))
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("name", no_wrap=True)
    table.add_column("policy", overflow="fold")
    table.add_column("when", overflow="fold")
    table.add_column("next tick", no_wrap=True)
    table.add_column("last tick", no_wrap=True)
    table.add_column("missed", no_wrap=True)
    table.add_column("queue", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for s in found:
        why = corrupt.get(id(s))
        if why is not None:  # every value shown as text, escaped
            table.add_row(
                Text(printable(str(s.name))),
                Text(printable(str(s.policy))),
                Text(printable(why)),
                Text(""),
                Text(""),
                Text(printable(str(s.missed))),
                Text(printable(str(s.queue))),
                Text("corrupt", style="red"),
            )
            continue
        upcoming = "" if s.paused else f"{when(s.next_at)} ({relative(s.next_at)})"
        table.add_row(
            Text(printable(s.name)),
            Text(printable(s.policy)),
            Text(printable(_timing(s))),
            Text(upcoming),
            Text(when(s.last_at)),
            Text(printable(s.missed)),
            Text(printable(s.queue)),
            Text("paused", style="yellow") if s.paused else Text("active"),
        )
    return table
