"""``stalwart signal``: send a run the signal it waits for (or will wait for).

The payload is JSON given on the command line; it is stored as data and
delivered when the run waits for a signal of that name.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .command import DEFAULT_STORE, StoreOption, console, execute, fail, get_run, lit, runner_for

__all__ = ["send_signal"]


def send_signal(
    run_id: Annotated[str, typer.Argument(help="The run's id.", metavar="RUN")],
    name: Annotated[str, typer.Argument(help="The signal's name, as the run waits for it.")],
    payload: Annotated[
        str, typer.Argument(help="The payload, as JSON (e.g. '{\"ok\": true}').", metavar="JSON")
    ],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Send a signal to a run; it is queued if the run does not wait for it yet.

    This never executes the run: the runner that started it, a worker, or
    `stalwart runs resume RUN --app MODULE` does.
    """
    try:
        value = json.loads(payload)
    except ValueError as exc:
        fail(f"the payload is not valid JSON ({exc}): {payload!r}", 2)

    async def go() -> None:
        async with runner_for(store) as runner:
            before = await get_run(runner, run_id)
            await runner.signal(run_id, name, value)
            after = await get_run(runner, run_id)
        out = console()
        out.print(f"sent signal {lit(repr(name))} to run {lit(run_id)}")
        if (
            before.status == "suspended"
            and before.waiting_for == name
            and after.status == "pending"
        ):
            out.print(
                "the run was waiting for it and is ready. This command does not execute it: "
                "the process that started it resumes it if it is still running, as does any "
                "worker on this store (`stalwart worker --app YOUR_MODULE`); or execute it "
                f"here with `stalwart runs resume {lit(run_id)} --app YOUR_MODULE`",
                soft_wrap=True,
            )
        else:
            waits = (
                f", and waits for {lit(repr(after.waiting_for))} now"
                if after.status == "suspended" and after.waiting_for
                else ""
            )
            out.print(
                f"queued: the run ({lit(after.status)}{waits}) takes it when it waits for "
                f"{lit(repr(name))}",
                soft_wrap=True,
            )

    execute(go)
