"""``stalwart evals dataset create|list|export|import``: datasets of cases
drawn from recorded runs, kept in the store (:mod:`stalwart.evals`), and as
JSON Lines files a repository holds.

A dataset read from a file or the store is data: its cases are checked
field by field, and nothing in it names code to import (S13).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ..core.errors import CLIError
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
    runner_for,
)
from .evals import when
from .runs import TagOption, parse_tags

if TYPE_CHECKING:
    from ..evals import Dataset, DatasetInfo

__all__ = ["create_dataset", "export_dataset", "import_dataset", "list_datasets"]

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The dataset's name.")]


def create_dataset(
    name: NameArgument,
    of: Annotated[
        str, typer.Option("--of", metavar="POLICY", help="Draw the runs of this policy.")
    ],
    status: Annotated[
        str,
        typer.Option("--status", metavar="STATUS", help="Runs of this status ('any': all)."),
    ] = "succeeded",
    since: Annotated[
        str | None, typer.Option("--since", metavar="TIME", help="Runs created from TIME (ISO).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", metavar="TIME", help="Runs created before TIME.")
    ] = None,
    tag: TagOption = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, help="At most N runs (newest).")
    ] = 100,
    description: Annotated[
        str, typer.Option("--description", metavar="TEXT", help="What the dataset is for.")
    ] = "",
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Save recorded runs as the next version of a dataset of cases.

    Each case holds a run's inputs as recorded and its outcome as the
    reference a new run is scored against. Saving the cases of the latest
    version again makes no new version.
    """
    from ..evals import Dataset, DatasetStore, Selection, cases_from_runs

    selection = Selection(
        policy=of,
        status=None if status == "any" else status,
        since=when(since, "--since"),
        until=when(until, "--until"),
        limit=limit,
        tags=parse_tags(tag) or {},
    )

    async def go() -> Dataset:
        async with runner_for(store) as runner:
            cases = await cases_from_runs(runner, selection)
            if not cases:
                raise CLIError(f"no recorded run of {of!r} matches; nothing saved", code=1)
            return await DatasetStore(runner.store).save(
                _dataset(lambda: Dataset(name, cases, description=description))
            )

    _said(execute(go), store, as_json)


def list_datasets(store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """List the datasets of the store: each one's latest version."""
    from ..evals import DatasetStore

    async def go() -> list[DatasetInfo]:
        async with reading(store) as st:
            return await DatasetStore(st).list()

    infos = execute(go)
    if as_json:
        print_document(store, datasets=[i.to_json() for i in infos])
        return
    table = Table("NAME", "VERSION", "CASES", "SAVED", "DESCRIPTION")
    for i in infos:
        saved = datetime.fromtimestamp(i.created_at).isoformat(timespec="seconds")
        table.add_row(lit(i.name), str(i.version), str(i.cases), saved, lit(i.description))
    print_table(table)


def export_dataset(
    name: NameArgument,
    out: Annotated[
        str, typer.Option("--out", "-o", metavar="FILE", help="The JSON Lines file ('-': stdout).")
    ] = "-",
    version: Annotated[
        int | None, typer.Option("--version", metavar="N", min=1, help="Default: the latest.")
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Write a dataset's version as JSON Lines: a header, then a case a line."""
    from ..evals import DatasetStore

    async def go() -> Dataset:
        async with reading(store) as st:
            try:
                return await DatasetStore(st).load(name, version)
            except KeyError as exc:
                raise CLIError(str(exc.args[0]), code=1) from None

    dataset = execute(go)
    if out == "-":
        sys.stdout.write(dataset.jsonl())
        return
    try:
        dataset.write_jsonl(out)
    except OSError as exc:
        fail(f"--out {out!r}: {exc}", 1)
    console().print(lit(f"wrote {len(dataset)} case(s) of {name} v{dataset.version} to {out}"))


def import_dataset(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="A JSON Lines file of cases.")],
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="NAME", help="Save under NAME (default: the file's)."),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Save a JSON Lines file of cases as the next version of a dataset."""
    from ..evals import Dataset, DatasetStore

    async def go() -> Dataset:
        dataset = _dataset(lambda: Dataset.read_jsonl(path, name))
        async with runner_for(store) as runner:
            return await DatasetStore(runner.store).save(dataset)

    _said(execute(go), store, as_json)


def _dataset(make: Callable[[], Dataset]) -> Dataset:
    """The dataset ``make`` builds; a bad one is a usage error naming where."""
    try:
        return make()
    except (ValueError, TypeError) as exc:
        raise CLIError(str(exc), code=2) from None


def _said(dataset: Dataset, store: str, as_json: bool) -> None:
    if as_json:
        print_document(
            store,
            dataset={"name": dataset.name, "version": dataset.version, "cases": len(dataset)},
        )
    else:
        console().print(lit(f"dataset {dataset.name} v{dataset.version}: {len(dataset)} case(s)"))
