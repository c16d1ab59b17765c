"""``stalwart demo``: the durable research agent, killed with SIGKILL and resumed.

The demo itself is :mod:`stalwart.demo`; this command checks the store first,
so that a bad URL fails before any process is started.
"""

from __future__ import annotations

import typer

from ..core.errors import CLIError
from .command import DEFAULT_STORE, StoreOption, console, execute, open_store

__all__ = ["demo"]


def demo(store: StoreOption = DEFAULT_STORE) -> None:
    """Run a research agent, kill it with SIGKILL mid-run, and resume it from the ledger."""

    async def go() -> bool:
        from ..demo import run_demo

        probe = open_store(store, must_exist=False)
        await probe.open()  # a bad store fails here, before any process is started
        await probe.close()
        try:
            report = await run_demo(store, console())
        except RuntimeError as exc:  # the child failed to start or to reach its pause
            raise CLIError(str(exc)) from None
        return not report.ran_twice and report.same_as_uninterrupted

    if not execute(go):
        raise typer.Exit(1)
