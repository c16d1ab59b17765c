"""``stalwart versions list | set-latest | retire`` and ``stalwart runs pin``.

The application versions the store's serving workers run
(:mod:`stalwart.runner.routing`): which one new runs go to, which are
retired, which live workers serve each and how many unfinished runs each
holds the code for; and pinning one run to a version by hand, after the
deploy gate has replayed it against that version's code. Versions and
owners are printed escaped, like everything read from a store.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.table import Table

from ..core.errors import CLIError
from ..core.redact import mask_url
from ..runner.routing import Fleet, fleet_of
from ..stores.versions import check_version
from .apps import AppOption, app_policies
from .command import (
    DEFAULT_STORE,
    JsonOption,
    StoreOption,
    console,
    execute,
    fail,
    lit,
    print_document,
    print_table,
    reading,
)

__all__ = ["checked", "list_versions", "pin_run", "retire_version", "set_latest"]

VersionArgument = Annotated[str, typer.Argument(help="The application version.", metavar="VERSION")]


def checked(version: str, where: str) -> str:
    """``version`` if an operator may name it; else a usage error naming ``where``."""
    try:
        return check_version(version, where)
    except ValueError as exc:
        fail(str(exc), 2)


async def _fleet(store: Any) -> Fleet:
    fleet = await fleet_of(store)
    if fleet is None:
        raise CLIError(f"the store {mask_url(store.url)} keeps no versions", code=2)
    return fleet


def list_versions(as_json: JsonOption = False, store: StoreOption = DEFAULT_STORE) -> None:
    """List the application versions: latest, retired, their live workers."""

    async def go() -> Fleet:
        async with reading(store) as ledger:
            return await _fleet(ledger)

    fleet = execute(go)
    rows: list[dict[str, Any]] = []
    for v in fleet.versions:
        live = [w.owner for w in fleet.live if w.version == v.version]
        rows.append(
            {
                "version": v.version,
                "latest": v.latest,
                "retired": v.retired,
                "retired_at": v.retired_at,
                "first_seen": v.first_seen,
                "live_workers": live,
            }
        )
    if as_json:
        print_document(store, versions=rows)
        return
    if not rows:
        console().print(f"no versions in {lit(mask_url(store))}: no worker has served yet")
        return
    table = Table("VERSION", "STATE", "LIVE WORKERS", "FIRST SEEN")
    for row in rows:
        state = "latest" if row["latest"] else "retired" if row["retired"] else "serving"
        table.add_row(
            lit(row["version"]),
            state,
            lit(", ".join(row["live_workers"]) or "-"),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["first_seen"])),
        )
    print_table(table)


def set_latest(version: VersionArgument, store: StoreOption = DEFAULT_STORE) -> None:
    """Send new runs to VERSION's workers (runs already started stay pinned)."""
    version = checked(version, "VERSION")

    async def go() -> None:
        async with reading(store) as ledger:
            await ledger.set_latest(version)

    execute(go)
    console().print(f"new runs go to version {lit(version)}")


def retire_version(version: VersionArgument, store: StoreOption = DEFAULT_STORE) -> None:
    """Retire VERSION: its workers take no more runs; runs only it could
    continue are listed as stranded (clear or pin them to another version)."""
    version = checked(version, "VERSION")

    async def go() -> int:
        async with reading(store) as ledger:
            await ledger.retire_version(version)
            fleet = await _fleet(ledger)
            stranded = 0
            for status in ("pending", "suspended", "running"):
                for rec in await ledger.list_runs(status=status, limit=1000):
                    if fleet.stranded(rec) is not None:
                        stranded += 1
            return stranded

    stranded = execute(go)
    console().print(
        f"version {lit(version)} is retired; {stranded} unfinished runs are stranded"
        + (" (stalwart runs list shows why)" if stranded else "")
    )


def pin_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.", metavar="RUN")],
    version: Annotated[
        str,
        typer.Option(
            "--version",
            metavar="VERSION",
            help="The version to move it to, as its workers are given it (worker --version).",
        ),
    ],
    app: AppOption,
    store: StoreOption = DEFAULT_STORE,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", metavar="SECONDS", min=0.001, help="How long the replay may take."
        ),
    ] = 30.0,
    as_json: JsonOption = False,
) -> None:
    """Move RUN to VERSION by hand: replay it against --app (VERSION's code)
    first, and refuse if that code would not continue it the same way."""
    from ..deploy import check_run

    version = checked(version, "--version")

    async def go() -> dict[str, Any]:
        policies = app_policies(app)
        async with reading(store) as ledger:
            read_at = time.time()
            run = await ledger.get_run(run_id)
            held = run is not None and run.status == "running"
            if held and run is not None and (run.lease_expires_at or 0) >= read_at:
                raise CLIError(
                    f"run {run_id!r} is executing on worker {run.owner!r}: pin it once it "
                    "waits or ends (its worker records steps the check would not see)",
                    code=1,
                )
            found = await check_run(ledger, run_id, policies, timeout=timeout)
            if found.verdict != "compatible":
                raise CLIError(
                    f"run {run_id!r} cannot be pinned to version {version!r}: {found.verdict}"
                    + (f" at step {found.step}" if found.step else "")
                    + (f": {found.why}" if found.why else "")
                    + (f"\n    recorded: {found.recorded}" if found.recorded is not None else "")
                    + (f"\n    now:      {found.now}" if found.now is not None else ""),
                    code=1,
                )
            assert run is not None  # check_run raised RunNotFound otherwise
            pinned = await ledger.pin_run(run_id, version, fence=run.fence)
            if pinned is None:
                raise CLIError(
                    f"run {run_id!r} is finished, or a worker took it while it was "
                    "checked: nothing was pinned (check it again)",
                    code=1,
                )
            return {"run_id": run_id, "version": version, "status": pinned.status}

    done = execute(go)
    if as_json:
        print_document(store, **done)
    else:
        console().print(f"run {lit(run_id)} is pinned to version {lit(version)}")
