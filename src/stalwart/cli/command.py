"""What every command shares: the store it opens, the console it prints on, how it fails.

Each command opens the store, does one thing through the public
:class:`~stalwart.runner.Runner` API, and closes it. The runner never
recovers runs on its own here (``serving=False``): a command that inspects
or signals a run must not start executing other people's runs as a side
effect. Expected failures (unknown run, bad store, bad input) print one line
on stderr and exit non-zero; only bugs show a traceback.

Everything printed from a store has its terminal controls escaped, and a
store URL is printed with its password masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from ..core.errors import CLIError, StalwartError
from ..core.redact import mask_url, printable, redact

if TYPE_CHECKING:
    from rich.table import Table

    from ..core.ledger import RunRecord
    from ..core.policy import Policy
    from ..runner import Runner
    from ..stores.base import Store

__all__ = [
    "DEFAULT_STORE",
    "Command",
    "Group",
    "JsonOption",
    "StoreOption",
    "console",
    "execute",
    "fail",
    "get_run",
    "lit",
    "open_store",
    "print_document",
    "print_json",
    "print_table",
    "reading",
    "runner_for",
    "store_url",
]

T = TypeVar("T")

DEFAULT_STORE = "sqlite:///stalwart.db"

StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        "-s",
        envvar="STALWART_STORE",
        metavar="URL",
        help="Store URL: sqlite:///path.db or postgresql://…",
        show_envvar=True,
    ),
]

JsonOption = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON document instead of a table (fields: docs/cli.md).",
    ),
]

# Wide enough for any row a ledger holds: a piped table takes its natural
# width (its widest cell), never the 80 columns Rich assumes off a terminal.
_UNCUT = 1_000_000


def _no_type(ctx: Any = None) -> None:
    return None


def _metavar(param: Any) -> None:
    """What ``--help`` shows after an option that takes a value, when its
    declaration names none: a flag shows nothing (it takes no value), a
    choice its choices, a number ``N``, anything else its own name in
    capitals (``--host HOST``). An argument shows its name in capitals."""
    name = str(param.name or "value")
    if getattr(param, "param_type_name", "") == "argument":
        # Its name is what it takes (RUN, JSON): no type column beside it.
        param.display_type_rich = _no_type
        if param.metavar is None:
            param.metavar = name.upper()
        return
    if param.metavar is not None:
        return
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        param.metavar = ""
        return
    desc = getattr(param, "type_descriptor", None)  # typer >= 0.20; else click's type
    kind = getattr(desc, "annotation", None) if desc is not None else None
    choices = (
        getattr(desc, "choices", None)
        if desc is not None
        else getattr(getattr(param, "type", None), "choices", None)
    )
    if choices:
        param.metavar = "|".join(str(getattr(c, "value", c)) for c in choices)
    elif kind is int or getattr(getattr(param, "type", None), "name", "") == "integer":
        param.metavar = "N"
    else:
        long = [o for o in param.opts if o.startswith("--")]
        param.metavar = (long[0][2:] if long else name).upper().replace("-", "_")


class Command(TyperCommand):
    """A command whose ``--help`` names what each option takes (``--store
    URL``, ``--limit N``) and shows a flag as a flag, never ``<str>`` or
    ``<bool>``; every command of the ``stalwart`` tree is one."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            _metavar(param)
        return params


class Group(TyperGroup):
    """A group of commands whose own ``--help`` shows flags as flags."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            _metavar(param)
        return params


def console() -> Console:
    """The console a command prints its result on (no guessing of highlights)."""
    return Console(highlight=False)


def print_table(table: Table) -> None:
    """A table on stdout, cut to the terminal only when there is one.

    Off a terminal (a pipe, a file) Rich would fit the table into 80
    columns and put an ellipsis in every long id; a script reading the
    output needs every cell whole, so the table is drawn at its natural
    width instead.
    """
    screen = console()
    if screen.is_terminal:
        screen.print(table)
    else:
        Console(highlight=False, width=_UNCUT).print(table)


def print_json(document: object) -> None:
    """One JSON document on stdout, for scripts.

    ASCII only: every other character is a ``\\u`` escape, so nothing a
    ledger holds can drive a terminal the output reaches, and any JSON
    parser reads it back unchanged.
    """
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=True) + "\n")


def print_document(store: str, **fields: Any) -> None:
    """What every ``--json`` prints: one object whose first field is
    ``store``, the store's URL with its password masked, then the command's
    own fields: a listing's things under their plural (``runs``,
    ``schedules``) and ``more`` (whether the limit left some out); one
    thing under its name (``run``)."""
    print_json({"store": mask_url(store), **fields})


def lit(value: object) -> str:
    """Ledger content (or a user's argument) for a markup string: shown as it
    is, neither read as markup nor able to drive the terminal."""
    return escape(printable(str(value)))


def fail(message: str, code: int) -> NoReturn:
    """One line on stderr. Error messages quote store URLs and ledger content
    (run ids, stored inputs), so passwords are masked here, once for all."""
    text = printable(redact(message.strip()))
    first = text.splitlines()[0] if text else "failed"
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"[red bold]error:[/] {escape(first)}"
    )
    raise typer.Exit(code)


def execute(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a command's coroutine; turn expected errors into one line and an exit code."""
    try:
        return asyncio.run(make())
    except CLIError as exc:
        fail(str(exc), exc.code)
    except StalwartError as exc:  # unknown run, store errors, input mismatch...
        fail(str(exc), 1)


def open_store(url: str, *, must_exist: bool = True, keys: bool = True) -> Store:
    """The store behind ``url``; a missing SQLite file is an error, not a new ledger.

    Encrypted when the environment names keys (``STALWART_KEYS``,
    ``STALWART_KEYS_FILE``), unless ``keys`` is False: values as stored.
    """
    from ..stores import open_store as open_url
    from ..stores.sqlite import SQLiteStore

    store = open_url(url, keys=keys)
    if store.ephemeral:
        raise CLIError(f"{mask_url(url)!r} keeps runs in memory only; give a durable store URL")
    raw = getattr(store, "inner", store)
    if must_exist and isinstance(raw, SQLiteStore) and not Path(raw.path).exists():
        raise CLIError(
            f"no store at {raw.path!r}: give --store sqlite:///path.db or set STALWART_STORE"
        )
    return store


@contextlib.asynccontextmanager
async def reading(url: str) -> AsyncIterator[Store]:
    """The store, open, for a command that only reads it.

    No runner: reading the ledger needs no worker loop, no lease and no
    policy, and executes nothing.
    """
    store = open_store(url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def runner_for(url: str, policies: Sequence[Policy[Any, Any]] = ()) -> Runner:
    """A runner on an existing store that executes nothing it was not asked to."""
    from ..runner import Runner

    return Runner(open_store(url), policies=policies, serving=False)


async def get_run(runner: Runner, run_id: str) -> RunRecord:
    """The run's record; an unknown id is an expected failure naming the store."""
    from ..core.errors import RunNotFound

    try:
        return await runner.get_run(run_id)
    except RunNotFound:
        raise CLIError(f"no run {run_id!r} in {store_url(runner)}") from None


def store_url(runner: Runner) -> str:
    """The runner's store URL, password masked, for a message."""
    return mask_url(runner.store.url)
