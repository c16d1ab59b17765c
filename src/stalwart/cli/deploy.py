"""``stalwart deploy check``: would the new code resume the runs in the store?

It replays every unfinished run (and each policy's latest finished runs)
against the policies of ``--app`` (the new code), executing nothing, and
prints each run's verdict; it exits 1 when an unfinished run would fail once
resumed, so a CI job can gate a deploy on it (:mod:`stalwart.deploy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from .apps import AppOption, app_policies
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

if TYPE_CHECKING:
    from ..deploy import DeployReport

__all__ = ["deploy_check"]


def deploy_check(
    app: AppOption,
    store: StoreOption = DEFAULT_STORE,
    finished: Annotated[
        int,
        typer.Option(
            "--finished",
            min=0,
            help="How many of each policy's latest finished runs to replay too (0: none).",
        ),
    ] = 20,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Block on finished runs the new code replays differently too."
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            min=0.001,
            help="How long one run's replay may take before it is called stuck.",
        ),
    ] = 30.0,
    clear: Annotated[
        bool,
        typer.Option(
            "--clear",
            help="Clear each unfinished run the new code reproduces for the new version, "
            "so that its workers may continue it (docs/deploy.md).",
        ),
    ] = False,
    version: Annotated[
        str | None,
        typer.Option(
            "--version",
            metavar="VERSION",
            help="The new code's version, as its workers are given it (stalwart worker "
            "--version); default: each policy's code version.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replay the store's runs against new code; exit 1 if any would fail when resumed.

    Every pending, running and suspended run, and the latest finished runs of
    each policy, are replayed through the policies of --app without
    executing anything. A run the new code cannot continue (another call
    where the run recorded one, no policy of its name) blocks the deploy.
    With --clear, the runs it can continue are cleared for its workers.
    """
    from ..deploy import check_deploy

    async def check() -> DeployReport:
        policies = app_policies(app)  # a bad --app is one error line, as any command's
        async with reading(store) as st:
            return await check_deploy(
                st,
                policies,
                finished=finished,
                strict=strict,
                timeout=timeout,
                clear=clear,
                version=version,
            )

    report = execute(check)
    if as_json:
        print_document(store, **report.to_dict())
    else:
        _print(report)
    if not report.ok:
        raise typer.Exit(1)


def _print(report: DeployReport) -> None:
    if report.runs:
        table = Table("RUN", "POLICY", "STATUS", "VERDICT", "STEP", "WHY")
        for r in report.runs:
            verdict = r.verdict + (" (blocks)" if r.blocks(report.strict) else "")
            table.add_row(
                lit(r.run_id), lit(r.policy), r.status, verdict, lit(r.step or ""), lit(r.why)
            )
        print_table(table)
    screen = console()
    screen.soft_wrap = True  # a long line stays one line: scripts grep it
    for line in str(report).splitlines():
        screen.print(lit(line))
    cleared = [r for r in report.runs if r.cleared_for is not None]
    if cleared:
        screen.print(
            lit(f"{len(cleared)} unfinished runs cleared for version {cleared[0].cleared_for}")
        )
