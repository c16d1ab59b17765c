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
from ..core.errors import CLIError
from ..timetravel.fork import Replace, fork
from .apps import AppOption, app_policies, policy_for
from .command import (
    DEFAULT_STORE,
    StoreOption,
    console,
    execute,
    get_run,
    lit,
    runner_for,
)

__all__ = ["fork_run", "parse_json"]


def parse_json(text: str | None, what: str) -> Any:
    """A value given as the ledger writes it (``stalwart runs show --json``
    prints it so): JSON whose tagged objects are messages and the types the
    program declared, decoded as data (S13)."""
    if text is None:
        return None
    try:
        json.loads(text)
        return codec.loads(text, what)
    except ValueError as exc:
        raise CLIError(f"{what} is not JSON ({exc}): {text[:200]!r}", code=2) from None


_RESULT_HELP = (
    "Step --at's new result, as JSON, in the shape the step recorded "
    "(`stalwart runs show RUN --json` prints it as the step's output): a tool's "
    "value as it is, e.g. '\"Paris: -5 C\"'; a model step's reply, a list of "
    'messages, e.g. \'[{"$t": "msg", "v": {"role": "assistant", '
    '"actor": "model", "parts": [{"type": "text", "text": "Edited."}]}}]\'.'
)


def fork_run(
    run_id: Annotated[
        str, typer.Argument(help="The run to fork (it is only read).", metavar="RUN")
    ],
    app_spec: AppOption = "",
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="KEY",
            help="The recorded step the fork runs live from (its key, as `runs show` lists it).",
        ),
    ] = None,
    new_run_id: Annotated[
        str | None,
        typer.Option("--new-run-id", metavar="ID", help="The fork's id (default: derived)."),
    ] = None,
    result: Annotated[
        str | None, typer.Option("--result", metavar="JSON", help=_RESULT_HELP)
    ] = None,
    inputs: Annotated[
        str | None,
        typer.Option(
            "--inputs",
            metavar="JSON",
            help='Keyword inputs to replace, a JSON object, e.g. \'{"question": "Why?"}\'.',
        ),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait for the fork's end (default: wait).")
    ] = True,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Fork a run at a step: replay what came before it, then run live.

    Exit code 0 when the fork succeeded (or, with --no-wait, started), 1 when
    it could not be made or failed.
    """
    out = console()

    async def go() -> str:
        new_result = parse_json(result, "--result")
        new_inputs = parse_json(inputs, "--inputs")
        if new_inputs is not None and not isinstance(new_inputs, dict):
            raise CLIError("--inputs must be a JSON object", code=2)
        if result is not None and at is None:
            raise CLIError("--result needs --at, the step whose result it is", code=2)
        policies = app_policies(app_spec) if app_spec else []
        async with runner_for(store, policies) as runner:
            rec = await get_run(runner, run_id)
            pol = policy_for(runner, rec, app_spec, policies)
            replace = Replace(inputs=new_inputs)
            if result is not None:
                replace = Replace(result=new_result, inputs=new_inputs)
            handle = await fork(
                runner, run_id, at=at, new_run_id=new_run_id, replace=replace, policy=pol
            )
            out.print(
                f"forked run {lit(run_id)} at step {lit(at or '(start)')}: {lit(handle.run_id)}"
            )
            if not wait:
                return (await runner.get_run(handle.run_id)).status
            try:
                await handle.result()
            except Exception as exc:  # the fork's own failure: one line, exit 1
                hint = (
                    f" (did --result have the shape step {at} recorded? see "
                    f"`stalwart runs show {run_id} --json`)"
                    if result is not None
                    else ""
                )
                raise CLIError(
                    f"fork {handle.run_id!r} of run {run_id!r} failed: "
                    f"{type(exc).__name__}: {exc}{hint}"
                ) from None
            return (await runner.get_run(handle.run_id)).status

    status = execute(go)
    out.print(f"  status: {lit(status)}")
