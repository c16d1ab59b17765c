"""``stalwart runs move``: an unfinished run moved to another store.

:func:`stalwart.timetravel.move_run` does the work: the run, its child runs,
mailbox and waits go to ``--to`` at a step boundary, resumable there by that
store's workers; the source keeps it as moved. Run again after a mover was
killed, it completes the move.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..core.errors import MoveError, StalwartError
from ..core.redact import mask_url, redact
from ..stores.base import Store
from ..timetravel.move import Moved, move_run
from .command import DEFAULT_STORE, StoreOption, console, execute, lit, open_store

__all__ = ["move"]


async def _open_target(url: str) -> Store:
    """The target store, open; an unreachable one is a :class:`MoveError`."""
    target = open_store(url, must_exist=False)
    try:
        await target.open()
    except (StalwartError, OSError) as exc:
        raise MoveError(
            f"cannot reach the target store {mask_url(url)}, nothing was moved: " + redact(str(exc))
        ) from None
    return target


def move(
    run_id: Annotated[str, typer.Argument(help="The unfinished run to move.", metavar="RUN")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="URL",
            help="The store to move it to (sqlite:///path or postgresql://...).",
        ),
    ],
    timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="How long a worker executing the run has to let it go (at its next durable wait).",
        ),
    ] = 30.0,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Move an unfinished run (its child runs, mailbox and waits) to the store
    --to: it resumes there, and this store keeps it as moved. Exit code 0 when
    moved, 1 when it could not be (nothing was changed); run it again after an
    interrupted move to complete it."""

    async def go() -> Moved:
        source = open_store(store)
        await source.open()
        try:
            target = await _open_target(to)
            try:
                return await move_run(source, target, run_id, timeout=timeout)
            finally:
                await target.close()
        finally:
            await source.close()

    moved = execute(go)
    console().print(
        f"moved {lit(moved.run_id)} to {lit(moved.to)}: {len(moved.runs)} run(s) resumable there"
    )
