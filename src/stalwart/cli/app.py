"""The ``stalwart`` command: inspect and operate the runs of a store.

This module only assembles the command tree; each group of commands lives in
its own module (:mod:`.runs`, :mod:`.pending`, :mod:`.resume`, :mod:`.signals`,
:mod:`.worker`, :mod:`.demo`), and what they share (the store, the console,
one-line failures) in :mod:`.command`.

What a store holds is data, possibly written by someone else (S13): no
command imports a name read from it (a run resumes only under a policy that
``--app`` provides), and everything printed from it has its terminal
controls escaped. A store URL is printed with its password masked.
"""

from __future__ import annotations

import typer

from .demo import demo
from .export import export_run, import_run
from .fork import fork_run
from .mcp_serve import mcp_serve
from .pending import waiting_runs
from .resume import resume_run
from .runs import cancel_run, count_runs, list_runs, prune_runs, show_run
from .schedules import delete_schedule, list_schedules, pause_schedule, resume_schedule
from .serve import serve
from .signals import send_signal
from .ui import ui
from .worker import worker

__all__ = ["app"]

app = typer.Typer(
    name="stalwart",
    help="Durable AI agents: inspect, resume, signal and prune the runs of a store.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
runs_app = typer.Typer(
    help="List, show, count, resume, cancel and prune runs; list those waiting for a human.",
    no_args_is_help=True,
)
app.add_typer(runs_app, name="runs")

runs_app.command("list")(list_runs)
runs_app.command("show")(show_run)
runs_app.command("count")(count_runs)
runs_app.command("waiting")(waiting_runs)
runs_app.command("resume")(resume_run)
runs_app.command("cancel")(cancel_run)
runs_app.command("prune")(prune_runs)
runs_app.command("export")(export_run)
runs_app.command("import")(import_run)
runs_app.command("fork")(fork_run)
app.command("signal")(send_signal)
app.command("demo")(demo)
app.command("worker")(worker)
app.command("ui")(ui)
app.command("serve")(serve)
mcp_app = typer.Typer(help="Serve policies as MCP tools.", no_args_is_help=True)
app.add_typer(mcp_app, name="mcp")
mcp_app.command("serve")(mcp_serve)
schedules_app = typer.Typer(
    help="List, pause, resume and delete recurring schedules.", no_args_is_help=True
)
app.add_typer(schedules_app, name="schedules")
schedules_app.command("list")(list_schedules)
schedules_app.command("pause")(pause_schedule)
schedules_app.command("resume")(resume_schedule)
schedules_app.command("delete")(delete_schedule)
