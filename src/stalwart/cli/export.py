"""``stalwart runs export`` and ``runs import``: runs as JSON Lines.

The format is :mod:`stalwart.timetravel.export`'s (``docs/time-travel.md``):
what the store keeps, byte for byte, so a run moves between SQLite and
PostgreSQL, or into a folder of recordings for replay tests.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..core.errors import CLIError
from ..stores.base import RunDump
from ..timetravel.export import (
    export_runs,
    export_tagged,
    import_runs,
    read_export,
    write_export,
)
from .command import DEFAULT_STORE, StoreOption, console, execute, fail, lit, open_store
from .runs import parse_tags

__all__ = ["export_run", "import_run"]


def export_run(
    run_id: Annotated[
        str | None, typer.Argument(help="The run's id (or --tag instead).", metavar="[RUN]")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            metavar="KEY=VALUE",
            help="Every run with this tag, not one RUN (repeat it: every one must match).",
        ),
    ] = None,
    children: Annotated[
        bool, typer.Option("--children", help="Also the child runs it spawned, theirs included.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write to this file, not stdout."),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Write a run (or every run with --tag's tags), its steps and signals (and
    with --children its child runs) as JSON Lines."""
    if (run_id is None) == (not tag):
        fail("runs export takes a RUN or --tag KEY=VALUE, not both and not neither", 2)

    async def go() -> list[RunDump]:
        tags = parse_tags(tag)
        st = open_store(store, keys=False)  # values as stored: ciphertext stays so
        await st.open()
        try:
            if tags is not None:
                return await export_tagged(st, tags, children=children)
            assert run_id is not None
            return await export_runs(st, run_id, children=children)
        finally:
            await st.close()

    dumps = execute(go)
    if output is None:
        write_export(dumps, sys.stdout)
        return
    with open(output, "w", encoding="utf-8") as f:
        count = write_export(dumps, f)
    console().print(f"exported {count} run(s) to {lit(output)}")


def import_run(
    source: Annotated[
        Path, typer.Argument(help="An export file (JSON Lines), or - for stdin.", metavar="FILE")
    ],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Import the runs of an export; a run id the store has already is left as it is."""

    async def go() -> tuple[list[str], int]:
        from ..core.errors import CorruptedRecord

        name = "<stdin>" if str(source) == "-" else str(source)
        try:
            dumps = read_export(sys.stdin) if str(source) == "-" else read_export(source)
        except OSError as exc:
            raise CLIError(f"cannot read {name!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise CLIError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        st = open_store(store, must_exist=False, keys=False)
        await st.open()
        try:
            return await import_runs(st, dumps), len(dumps)
        except CorruptedRecord as exc:
            raise CLIError(f"{name}: {exc}; nothing was imported") from None
        finally:
            await st.close()

    done, total = execute(go)
    out = console()
    out.print(f"imported {len(done)} of {total} run(s)")
    for run_id in done:
        out.print(f"  {lit(run_id)}")
