"""The ``stalwart`` command: inspect and operate the runs of a store.

This module only assembles the command tree; each group of commands lives in
its own module (:mod:`.runs`, :mod:`.pending`, :mod:`.resume`, :mod:`.signals`,
:mod:`.worker`, :mod:`.demo`, :mod:`.program`, :mod:`.ddl` ...), and what they share
(the store, the console, one-line failures) in :mod:`.command`.

What a store holds is data, possibly written by someone else (S13): no
command imports a name read from it (a run resumes only under a policy that
``--app`` provides), and everything printed from it has its terminal
controls escaped. A store URL is printed with its password masked.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from typing import Annotated

import typer

from .a2a_serve import a2a_serve
from .command import Command, Group
from .datasets import create_dataset, export_dataset, import_dataset, list_datasets
from .ddl import store_ddl
from .demo import demo
from .deploy import deploy_check
from .encryption import store_keygen, store_reencrypt, subjects_erase
from .evals import counterfactual_runs, run_experiment
from .export import export_run, import_run
from .fork import fork_run
from .mcp_serve import mcp_serve
from .move import move
from .pending import waiting_runs
from .program import CONTEXT, run_program
from .resume import resume_run
from .runs import cancel_run, count_runs, list_runs, prune_runs, show_run
from .schedules import delete_schedule, list_schedules, pause_schedule, resume_schedule
from .serve import serve
from .signals import send_signal
from .ui import ui
from .versions import list_versions, pin_run, retire_version, set_latest
from .worker import worker

__all__ = ["app"]

app = typer.Typer(
    name="stalwart",
    help="Durable AI agents: inspect, resume, signal and prune the runs of a store.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    cls=Group,
)


def _version() -> str:
    """The installed distribution's version (the package's own when it is
    run from a checkout that was never installed)."""
    try:
        return installed_version("stalwart")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"stalwart {_version()}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the installed version and exit.",
        ),
    ] = False,
) -> None:
    """Durable AI agents: inspect, resume, signal and prune the runs of a store."""


def _group(help_text: str) -> typer.Typer:
    return typer.Typer(help=help_text, no_args_is_help=True, cls=Group)


runs_app = _group(
    "List, show, count, resume, cancel, prune, export, import, fork, move and pin runs; "
    "list those waiting for a human."
)
app.add_typer(runs_app, name="runs")

runs_app.command("list", cls=Command)(list_runs)
runs_app.command("show", cls=Command)(show_run)
runs_app.command("count", cls=Command)(count_runs)
runs_app.command("waiting", cls=Command)(waiting_runs)
runs_app.command("resume", cls=Command)(resume_run)
runs_app.command("cancel", cls=Command)(cancel_run)
runs_app.command("prune", cls=Command)(prune_runs)
runs_app.command("export", cls=Command)(export_run)
runs_app.command("import", cls=Command)(import_run)
runs_app.command("fork", cls=Command)(fork_run)
runs_app.command("move", cls=Command)(move)
runs_app.command("pin", cls=Command)(pin_run)
app.command("run", cls=Command, context_settings=CONTEXT)(run_program)
app.command("signal", cls=Command)(send_signal)
app.command("demo", cls=Command)(demo)
app.command("worker", cls=Command)(worker)
app.command("ui", cls=Command)(ui)
app.command("serve", cls=Command)(serve)
mcp_app = _group("Serve policies as MCP tools.")
app.add_typer(mcp_app, name="mcp")
mcp_app.command("serve", cls=Command)(mcp_serve)
a2a_app = _group("Serve a policy or an agent as an A2A agent.")
app.add_typer(a2a_app, name="a2a")
a2a_app.command("serve", cls=Command)(a2a_serve)
schedules_app = _group("List, pause, resume and delete recurring schedules.")
app.add_typer(schedules_app, name="schedules")
schedules_app.command("list", cls=Command)(list_schedules)
schedules_app.command("pause", cls=Command)(pause_schedule)
schedules_app.command("resume", cls=Command)(resume_schedule)
schedules_app.command("delete", cls=Command)(delete_schedule)
deploy_app = _group("Check new code against the runs it would resume, before deploying it.")
app.add_typer(deploy_app, name="deploy")
deploy_app.command("check", cls=Command)(deploy_check)
versions_app = _group(
    "List the application versions workers run; send new runs to one; retire one."
)
app.add_typer(versions_app, name="versions")
versions_app.command("list", cls=Command)(list_versions)
versions_app.command("set-latest", cls=Command)(set_latest)
versions_app.command("retire", cls=Command)(retire_version)
evals_app = _group(
    "Evaluate new code on the recorded runs: fork them at a step, or run datasets of cases "
    "drawn from them; score old vs new."
)
app.add_typer(evals_app, name="evals")
evals_app.command("counterfactual", cls=Command)(counterfactual_runs)
evals_app.command("run", cls=Command)(run_experiment)
dataset_app = _group("Create, list, export and import datasets of cases drawn from recorded runs.")
evals_app.add_typer(dataset_app, name="dataset")
dataset_app.command("create", cls=Command)(create_dataset)
dataset_app.command("list", cls=Command)(list_datasets)
dataset_app.command("export", cls=Command)(export_dataset)
dataset_app.command("import", cls=Command)(import_dataset)
store_app = _group(
    "Provision a store's tables for operators who run the SQL themselves; "
    "make encryption keys; seal every value under the newest one."
)
app.add_typer(store_app, name="store")
store_app.command("ddl", cls=Command)(store_ddl)
store_app.command("keygen", cls=Command)(store_keygen)
store_app.command("reencrypt", cls=Command)(store_reencrypt)
subjects_app = _group("Erase a subject's values everywhere at once (encrypted stores).")
app.add_typer(subjects_app, name="subjects")
subjects_app.command("erase", cls=Command)(subjects_erase)
