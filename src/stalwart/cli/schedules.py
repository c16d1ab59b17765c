"""``stalwart schedules list | pause | resume | delete``: the store's recurring schedules.

Schedules are defined by the application (``runner.schedule(...)``), which
checks their inputs against the policy's schema; these commands look at them
and switch them off and on. None of them executes a run: ticks run on
workers (``stalwart worker --app MODULE``). Everything printed from a
schedule row (its name, policy, inputs) has its terminal controls escaped.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ..core.redact import mask_url, printable
from .command import (
    DEFAULT_STORE,
    JsonOption,
    StoreOption,
    console,
    execute,
    lit,
    print_json,
    print_table,
    reading,
    runner_for,
)

__all__ = ["delete_schedule", "list_schedules", "pause_schedule", "resume_schedule"]

NameArgument = Annotated[str, typer.Argument(help="The schedule's name.")]


def list_schedules(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 1000,
    as_json: JsonOption = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """List the schedules: timing, policy, next and last tick, paused or not."""

    async def go() -> None:
        async with reading(store) as ledger:
            found = await ledger.list_schedules(limit)
        if as_json:
            print_json({"store": mask_url(store), "schedules": [_data(s) for s in found]})
            return
        if not found:
            console().print(f"no schedule in {lit(mask_url(store))}")
            return
        print_table(_table(found, mask_url(store)))

    execute(go)


def pause_schedule(name: NameArgument, store: StoreOption = DEFAULT_STORE) -> None:
    """Stop a schedule's ticks until it is resumed (runs already started go on)."""

    async def go() -> None:
        async with runner_for(store) as runner:
            await runner.pause_schedule(name)
        console().print(f"schedule {lit(name)} paused")

    execute(go)


def resume_schedule(name: NameArgument, store: StoreOption = DEFAULT_STORE) -> None:
    """Tick again from the next tick after now (ticks while paused do not run)."""
    from .render.times import when

    async def go() -> None:
        async with runner_for(store) as runner:
            s = await runner.resume_schedule(name)
        console().print(f"schedule {lit(name)} resumed; next tick {lit(when(s.next_at))}")

    execute(go)


def delete_schedule(name: NameArgument, store: StoreOption = DEFAULT_STORE) -> None:
    """Delete a schedule; the runs it started stay."""

    async def go() -> None:
        async with runner_for(store) as runner:
            await runner.delete_schedule(name)
        console().print(f"schedule {lit(name)} deleted")

    execute(go)


def _timing(s: Any) -> str:
    from ..runner.schedules import Timing

    try:
        return Timing.of_record(s).describe()
    except ValueError:  # a row edited by hand: show what it holds
        return f"cron {s.cron!r} in {s.timezone!r}" if s.cron else f"every {s.every!r} s"


def _data(s: Any) -> dict[str, Any]:
    return {
        "name": s.name,
        "policy": s.policy,
        "inputs": s.inputs,
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


def _table(found: list[Any], where: str) -> Table:
    from .render.times import relative, when

    n = len(found)
    title = Text(printable(f"{n} schedule{'s' if n != 1 else ''} in {where}"))
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
