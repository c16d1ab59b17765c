"""``stalwart runs fork``: a new run from another's recorded prefix.

The fork replays the original's steps before ``--at`` and runs live from
there, under a policy that ``--app`` provides (never one named by the store,
S13). ``--result`` sets step ``--at``'s recorded result, ``--inputs``
replaces some of the run's keyword inputs; both are JSON.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ..core import codec
from ..timetravel.fork import Replace, fork
from .apps import AppOption, app_policies, policy_for
from .command import (
    DEFAULT_STORE,
    CLIError,
    StoreOption,
    console,
    execute,
    get_run,
    lit,
    runner_for,
)

__all__ = ["fork_run"]


def _json(text: str | None, what: str) -> Any:
    """A value given as the ledger writes it (``stalwart runs show --json``
    prints it so): JSON whose tagged objects are messages and the types the
    program declared, decoded as data (S13)."""
    if text is None:
        return None
    try:
        json.loads(text)
        return codec.loads(text, what)
    except ValueError as exc:
        raise CLIError(f"{what} is not JSON: {exc}") from None


def fork_run(
    run_id: Annotated[str, typer.Argument(help="The run to fork (it is only read).")],
    app_spec: AppOption = "",
    at: Annotated[
        str | None, typer.Option("--at", help="The step key the fork runs live from.")
    ] = None,
    new_run_id: Annotated[
        str | None, typer.Option("--new-run-id", help="The fork's id (default: derived).")
    ] = None,
    result: Annotated[
        str | None, typer.Option("--result", help="Step --at's result, as JSON.")
    ] = None,
    inputs: Annotated[
        str | None, typer.Option("--inputs", help="Keyword inputs to replace, a JSON object.")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait for the fork's end.")] = True,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Fork a run at a step: replay what came before it, then run live."""
    out = console()

    async def go() -> str:
        new_result = _json(result, "--result")
        new_inputs = _json(inputs, "--inputs")
        if new_inputs is not None and not isinstance(new_inputs, dict):
            raise CLIError("--inputs must be a JSON object")
        policies = app_policies(app_spec) if app_spec else []
        async with runner_for(store, policies) as runner:
            rec = await get_run(runner, run_id)
            pol = policy_for(runner, rec, app_spec, policies)
            replace = Replace(inputs=new_inputs)
            if result is not None:
                if at is None:
                    raise CLIError("--result needs --at, the step whose result it is")
                replace = Replace(result=new_result, inputs=new_inputs)
            handle = await fork(
                runner, run_id, at=at, new_run_id=new_run_id, replace=replace, policy=pol
            )
            out.print(
                f"forked run {lit(run_id)} at step {lit(at or '(start)')}: {lit(handle.run_id)}"
            )
            if wait:
                try:
                    await handle.result()
                except Exception as exc:  # the fork's own failure: shown, not a crash
                    out.print(f"  failed: {lit(exc)}")
                    return "failed"
            return (await runner.get_run(handle.run_id)).status

    status = execute(go)
    out.print(f"  status: {lit(status)}")
