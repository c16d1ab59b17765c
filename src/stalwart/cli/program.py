"""``stalwart run PROGRAM.py [ARGS...]``: an unmodified PocketFlow program, durable.

The program runs in this process as ``python PROGRAM.py ARGS`` would, with
``import pocketflow`` served by ``stalwart.flow`` and each flow it runs a
durable run on the store (:mod:`stalwart.flow.program` says how, and how
the runs are named). What it prints is all that is printed; the exit code
is the program's own (``sys.exit``), 1 when it raised (its traceback on
stderr, then one ``error:`` line naming the flow and the run), 2 when the
program cannot be run at all.

Options are read before and after ``PROGRAM.py``; everything after ``--``
goes to the program as it is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from ..core.errors import CLIError, StalwartError
from ..core.redact import printable, redact
from .command import DEFAULT_STORE, StoreOption, execute, fail, open_store

if TYPE_CHECKING:
    from ..flow.program import Program

__all__ = ["CONTEXT", "run_program"]

# Where the frames a program's traceback leaves out live.
_INTERNAL = tuple(
    str(Path(module.__file__ or "").parent) + os.sep
    for module in (sys.modules["stalwart"], asyncio, concurrent.futures)
)

#: Its arguments may be options of the program's own (``--question x``).
CONTEXT = {"allow_interspersed_args": True, "ignore_unknown_options": True}


def run_program(
    program: Annotated[
        str,
        typer.Argument(help="The program, a Python file, as `python PROGRAM.py` runs it."),
    ],
    args: Annotated[
        list[str] | None,
        typer.Argument(help="The program's arguments (after `--`: even options of ours)."),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            metavar="ID",
            help="The id of the program's first flow run (the n-th: ID.n); "
            "derived from the program and its arguments if omitted.",
        ),
    ] = None,
    codec: Annotated[
        list[str] | None,
        typer.Option(
            "--codec",
            metavar="NAME",
            help="Record values of this kind too: numpy, pandas or pil "
            "(repeat for several; see stalwart.codecs).",
        ),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Run a PocketFlow program, unchanged, with every flow it runs durable.

    `import pocketflow` is served by stalwart.flow in this process only. Run
    the same command again after a crash and each flow resumes where it
    stopped: finished nodes are not run again, answers typed at input() are
    not asked again.
    """
    from .. import codecs
    from ..core.ledger import check_run_id
    from ..flow.program import Program, base_run_id

    argv = list(args or [])
    try:
        codecs.use(*(codec or []))
    except (ValueError, ImportError) as exc:
        fail(f"--codec: {exc}", 2)
    path = Path(program)
    if not path.is_file():
        what = "a folder, not a file" if path.is_dir() else "no such file"
        fail(f"cannot run the program {program!r}: {what}", 2)
    try:
        base = base_run_id(path, argv) if run_id is None else check_run_id(run_id)
        prog = Program(store, base)
    except ValueError as exc:
        fail(f"--run-id {run_id!r}: {exc}", 2)

    async def probe() -> None:  # a bad store fails here, before the program starts
        found = open_store(store, must_exist=False)
        await found.open()
        await found.close()

    execute(probe)
    _execute(prog, path, argv)


def _execute(prog: Program, path: Path, argv: list[str]) -> None:
    """Run the program; its end as this command's exit code."""
    try:
        prog.execute(path, argv)
    except SystemExit as done:
        code = done.code
        if code is None or isinstance(code, int):
            raise typer.Exit(code or 0) from None
        sys.stderr.write(f"{code}\n")  # sys.exit("message"), as Python reports it
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except CLIError:
        raise
    except BaseException as exc:
        _report(prog, path, exc)


def _report(prog: Program, path: Path, exc: BaseException) -> NoReturn:
    """What the program raised: its traceback (unless the error is
    Stalwart's own, whose message says it all), then one line naming the
    flow and run it came from."""
    where = f"the program {str(path)!r}"
    failed = next((run for run in prog.runs if _caused(exc, run.error)), None)
    if failed is not None:
        where += f", flow {failed.flow} (run {failed.run_id!r})"
    if isinstance(exc, StalwartError):
        _fail_whole(f"{where}: {exc}")
    sys.stderr.write(_user_traceback(exc))
    message = f"{where} raised {type(exc).__name__}: {exc}"
    if failed is not None and failed.status == "failed":
        message += (
            "; the run is recorded as failed, so this command raises it again: "
            "give a new --run-id to start over"
        )
    fail(message, 1)


def _caused(exc: BaseException, error: BaseException | None) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if current is error:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _user_traceback(exc: BaseException) -> str:
    """The traceback as the program's author needs it: their frames only,
    as under PocketFlow, without Stalwart's, asyncio's or runpy's between
    them (a traceback with nothing else is kept whole)."""
    shown = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    seen: set[int] = set()
    pending: list[traceback.TracebackException | None] = [shown]
    while pending:
        part = pending.pop()
        if part is None or id(part) in seen:
            continue
        seen.add(id(part))
        mine = [frame for frame in part.stack if not _internal(frame.filename)]
        if mine:
            part.stack = traceback.StackSummary.from_list(mine)
        pending += [part.__cause__, part.__context__]
    return "".join(shown.format())


def _internal(filename: str) -> bool:
    return filename.startswith(_INTERNAL) or filename in (runpy.__file__, "<frozen runpy>")


def _fail_whole(message: str) -> NoReturn:
    """``fail`` for a message whose every line matters (a nondeterminism
    error shows the recorded and the new call on lines of their own)."""
    lines = [printable(redact(line)) for line in message.strip().splitlines()] or ["failed"]
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"[red bold]error:[/] {escape(lines[0])}")
    for line in lines[1:]:
        err.print(escape(line))
    raise typer.Exit(1)
