"""``stalwart runs waiting``: the decisions waiting for a human, with what they ask.

A run waiting for a signal (``ctx.ask``, ``ctx.wait_for``) is suspended with
the signal's name in its row; what it asks (the prompt, and the details the
policy attached with ``about=``) is a ``stalwart.ask`` step recorded just
before the wait. This command reads both, oldest wait first, and executes
nothing.
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
    print_document,
    print_table,
    reading,
)

__all__ = ["ASK_WINDOW", "waiting_runs"]

#: The latest steps of a waiting run read for what it asks (each a whole
#: record: never the run's every step).
ASK_WINDOW = 50


def waiting_runs(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 100,
    full: Annotated[
        bool, typer.Option("--full", help="Do not shorten prompts (never shortened when piped).")
    ] = False,
    as_json: JsonOption = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """List every run waiting for a signal, the longest waiting first, with what it asks."""
    from ..runner.routing import fleet_of
    from .render.data import Asked, asked_of, run_data

    async def go() -> None:
        found: list[tuple[Any, Asked | None]] = []
        async with reading(store) as ledger:
            # One more than asked: whether the limit left some out.
            waiting = await ledger.waiting_for_signals(limit + 1)
            fleet = await fleet_of(ledger)
            for rec in waiting[:limit]:
                # What it asks was recorded just before the wait: among its latest steps.
                page = await ledger.step_page(rec.id, ASK_WINDOW)
                found.append((rec, asked_of(page.steps, rec.waiting_for or "")))
        if as_json:
            print_document(
                store,
                runs=[
                    {
                        **run_data(rec, stranded=None if fleet is None else fleet.stranded(rec)),
                        "signal": rec.waiting_for,
                        "waiting_since": rec.updated_at,
                        "deadline": rec.wake_at,
                        "prompt": asked.prompt if asked else None,
                        "about": asked.about if asked else None,
                    }
                    for rec, asked in found
                ],
                more=len(waiting) > limit,
            )
            return
        if not found:
            console().print(f"no run waits for a signal in {lit(mask_url(store))}")
            return
        # A prompt is shortened on a terminal only: a script reads it whole.
        cut = None if full or not console().is_terminal else 200
        print_table(_table(found, mask_url(store), cut))

    execute(go)


def _table(found: list[tuple[Any, Any]], where: str, limit: int | None) -> Table:
    from .render.times import relative, when
    from .render.values import plain, value_text

    n = len(found)
    title = Text(printable(f"{n} run{'s' if n != 1 else ''} waiting for a signal in {where}"))
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("id", no_wrap=True)
    table.add_column("policy", overflow="fold")
    table.add_column("signal", no_wrap=True)
    table.add_column("waiting since", no_wrap=True)
    table.add_column("deadline", no_wrap=True)
    table.add_column("asks", overflow="fold", min_width=20)
    for rec, asked in found:
        asks = Text()
        if asked is not None and asked.prompt is not None:
            asks.append(value_text(asked.prompt, limit))
        if asked is not None and asked.about is not None:
            if asks:
                asks.append("  ")
            asks.append(value_text(plain(asked.about), limit), style="dim")
        table.add_row(
            Text(printable(rec.id)),
            Text(printable(rec.policy)),
            Text(printable(rec.waiting_for or "")),
            Text(f"{when(rec.updated_at)} ({relative(rec.updated_at)})"),
            Text("" if rec.wake_at is None else when(rec.wake_at)),
            asks,
        )
    return table
