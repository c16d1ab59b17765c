"""``stalwart worker``: serve the store's queues until SIGTERM.

The worker executes runs under the policies ``--app`` provides, and nothing
else: a run naming any other policy waits for a worker that has it (S13).
"""

from __future__ import annotations

from typing import Annotated

import typer

from .apps import AppOption, app_policies
from .command import DEFAULT_STORE, StoreOption, console, execute, lit, open_store, store_url

__all__ = ["worker"]


def worker(
    store: StoreOption = DEFAULT_STORE,
    app_spec: AppOption = "",
    queue: Annotated[
        list[str] | None,
        typer.Option("--queue", "-q", help="queue to take runs from (repeat; default: all)"),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="most runs this worker executes at once")] = 50,
    lease: Annotated[float, typer.Option(help="seconds a claim lasts without a heartbeat")] = 30.0,
    shutdown_timeout: Annotated[
        float, typer.Option(help="seconds held runs may finish after SIGTERM")
    ] = 30.0,
) -> None:
    """Execute runs from the store's queues until SIGTERM (then finish or hand back)."""

    async def go() -> None:
        from ..runner import Runner

        policies = app_policies(app_spec) if app_spec else []
        runner = Runner(
            open_store(store, must_exist=False),
            policies=policies,
            queues=queue or None,
            concurrency=concurrency,
            lease=lease,
            shutdown_timeout=shutdown_timeout,
        )
        names = ", ".join(sorted({p.name for p in policies})) or "(none)"
        console().print(
            f"worker {lit(runner.owner)}: store {lit(store_url(runner))}, queues "
            f"{lit(', '.join(queue) if queue else 'all')}, concurrency {concurrency}, "
            f"policies {lit(names)}",
            soft_wrap=True,
        )
        await runner.serve()
        console().print("worker stopped")

    execute(go)
