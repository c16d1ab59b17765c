"""``stalwart runs list | show | count | cancel | prune``: look at runs and tidy them up.

None of these executes a run: they read the ledger, ask a run to stop, or
delete finished runs. ``runs resume``, which executes one, is in
:mod:`.resume`.
"""

from __future__ import annotations

import enum
import re
import shlex
from typing import Annotated

import typer
from rich.text import Text

from ..core.errors import CLIError
from ..core.redact import mask_url, printable
from ..core.tags import check_tags, parse_tag
from .command import (
    DEFAULT_STORE,
    JsonOption,
    StoreOption,
    console,
    execute,
    fail,
    get_run,
    lit,
    print_document,
    print_table,
    reading,
    runner_for,
)

__all__ = [
    "Status",
    "cancel_run",
    "count_runs",
    "list_runs",
    "parse_duration",
    "parse_tags",
    "prune_runs",
    "show_run",
]


class Status(enum.StrEnum):
    pending = "pending"
    running = "running"
    suspended = "suspended"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds in "7d", "12h", "30m", "45s", "2w" or "1h30m"."""
    cleaned = text.strip().lower().replace(" ", "")
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise CLIError(
            f"cannot read the duration {text!r}: write it like 7d, 12h, 30m or 1h30m", code=2
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


TagOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        metavar="KEY=VALUE",
        help="Only runs with this tag (repeat it: every one must match).",
    ),
]


def parse_tags(given: list[str] | None) -> dict[str, str] | None:
    """The ``--tag key=value`` options as tags (None for none), or a usage
    error naming the one that is not a tag."""
    if not given:
        return None
    tags: dict[str, str] = {}
    for text in given:
        try:
            key, value = parse_tag(text, "=", "--tag")
        except (ValueError, TypeError) as exc:
            raise CLIError(str(exc), code=2) from None
        if key in tags and tags[key] != value:
            raise CLIError(f"--tag: key {key!r} given twice, with two values", code=2)
        tags[key] = value
    try:
        return check_tags(tags, "--tag")
    except ValueError as exc:
        raise CLIError(str(exc), code=2) from None


def list_runs(
    status: Annotated[
        Status | None, typer.Option("--status", help="Only runs with this status.")
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option("--policy", metavar="NAME", help="Only runs of this policy (its name)."),
    ] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", metavar="NAME", help="Only runs on this queue.")
    ] = None,
    id_contains: Annotated[
        str | None,
        typer.Option(
            "--id-contains", metavar="TEXT", help="Only runs whose id contains this text."
        ),
    ] = None,
    tag: TagOption = None,
    text: Annotated[
        str | None,
        typer.Option(
            "--text",
            metavar="WORDS",
            help="Only runs whose inputs, result or error hold every one of these words.",
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 50,
    before: Annotated[
        str | None,
        typer.Option(
            "--before",
            metavar="CURSOR",
            help="The next page: the cursor a previous listing printed.",
        ),
    ] = None,
    as_json: JsonOption = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """List runs, newest first, a page at a time; a run no live worker can
    continue says it is stranded, and why."""
    from ..runner.routing import fleet_of
    from ..stores.search import search_words
    from .render.data import cursor_of, parse_cursor, run_data
    from .render.runs import runs_table

    try:
        tags = parse_tags(tag)
        if text is not None:
            search_words(text)
    except CLIError as exc:
        fail(str(exc), exc.code)
    except ValueError as exc:
        fail(f"--text: {exc}", 2)

    async def go() -> None:
        after = parse_cursor(before) if before is not None else None
        async with reading(store) as ledger:
            # One more than asked: whether there is a next page, without a count.
            runs = await ledger.list_runs(
                status.value if status else None,
                limit + 1,
                queue=queue,
                policy=policy,
                id_contains=id_contains,
                before=after,
                tags=tags,
                text=text,
            )
            fleet = await fleet_of(ledger)
        more = len(runs) > limit
        runs = runs[:limit]
        stranded = {} if fleet is None else {r.id: fleet.stranded(r) for r in runs}
        cursor = cursor_of(runs[-1]) if more else None
        if as_json:
            print_document(
                store,
                runs=[run_data(r, stranded=stranded.get(r.id)) for r in runs],
                more=cursor is not None,
                next=cursor,
            )
            return
        kind = f"{status.value} " if status else ""
        if not runs:
            console().print(f"no {kind}runs in {lit(mask_url(store))}")
            return
        plural = "s" if len(runs) != 1 else ""
        title = f"{len(runs)} {kind}run{plural} in {mask_url(store)}"
        print_table(runs_table(runs, title, stranded))
        if cursor is not None:
            console().print(f"more: --before {lit(shlex.quote(cursor))}", soft_wrap=True)

    execute(go)


#: Steps ``runs show`` prints unless told: the latest. Each is a whole
#: record (a model call's holds the conversation so far).
SHOW_STEPS = 50


def show_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.", metavar="RUN")],
    full: Annotated[bool, typer.Option("--full", help="Do not shorten values.")] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", min=1, help="At most this many steps: the latest ones."),
    ] = SHOW_STEPS,
    before: Annotated[
        str | None,
        typer.Option(
            "--before",
            metavar="CURSOR",
            help="The steps before these: the cursor a previous `runs show` printed.",
        ),
    ] = None,
    as_json: JsonOption = False,
    store: StoreOption = DEFAULT_STORE,
    app_spec: Annotated[
        str,
        typer.Option(
            "--app",
            metavar="MODULE",
            help="Your policies (as `worker --app`): inputs are shown by parameter name.",
        ),
    ] = "",
) -> None:
    """Show a run: status, inputs, outcome, and its latest steps as a tree by key."""
    from ..runner.routing import fleet_of
    from .apps import app_policies
    from .render.data import parse_cursor, run_data, step_cursor, step_data
    from .render.runs import run_header
    from .render.steps import steps_tree

    cut = None if full else 100
    position = None if before is None else parse_cursor(before, "stalwart runs show")

    async def go() -> None:
        async with runner_for(store) as runner:
            rec = await get_run(runner, run_id)
            page = await runner.step_page(run_id, limit, before=position)
            fleet = await fleet_of(runner.store)
        why = None if fleet is None else fleet.stranded(rec)
        steps = page.steps
        # Where the steps before these begin, when some were left out.
        cursor = step_cursor(steps[0]) if page.earlier and steps else None
        if as_json:
            print_document(
                store,
                run=run_data(rec, values=True, stranded=why),
                steps=[step_data(s) for s in steps],
                step_count=page.count,
                earlier=page.earlier,
                later=page.later,
                next=cursor,
            )
            return
        screen = console()
        known = {p.name: p for p in app_policies(app_spec)} if app_spec else {}
        screen.print(
            run_header(rec, limit=None if full else 300, policy=known.get(rec.policy), stranded=why)
        )
        if not steps:
            screen.print("no recorded steps")
            return
        if len(steps) == page.count:
            title = f"{len(steps)} recorded steps"
        else:
            first, last = page.earlier + 1, page.earlier + len(steps)
            title = f"recorded steps {first}-{last} of {page.count}, in the order they finished"
        screen.print(steps_tree(steps, title, limit=cut))
        if cursor is not None:
            screen.print(
                f"{page.earlier} earlier step{'s' if page.earlier != 1 else ''} left out: "
                f"--before {lit(shlex.quote(cursor))}",
                soft_wrap=True,
            )
        if page.later:
            screen.print(
                f"{page.later} later step{'s' if page.later != 1 else ''} left out: "
                "leave out --before for the latest",
                soft_wrap=True,
            )

    execute(go)


def count_runs(
    queue: Annotated[
        str | None, typer.Option("--queue", metavar="NAME", help="Only runs on this queue.")
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option("--policy", metavar="NAME", help="Only runs of this policy (its name)."),
    ] = None,
    tag: TagOption = None,
    as_json: JsonOption = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Count runs by status and queue (one query, however many runs there are)."""
    from rich.table import Table

    from .render.data import STATUSES

    try:
        tags = parse_tags(tag)
    except CLIError as exc:
        fail(str(exc), exc.code)

    async def go() -> None:
        async with reading(store) as ledger:
            counts = await ledger.count_runs(queue=queue, policy=policy, tags=tags)
        by_status = {s: sum(counts.get(s, {}).values()) for s in STATUSES}
        for other in sorted(set(counts) - set(STATUSES)):  # a status this version does not know
            by_status[other] = sum(counts[other].values())
        by_queue: dict[str, int] = {}
        for per_queue in counts.values():
            for name, n in per_queue.items():
                by_queue[name] = by_queue.get(name, 0) + n
        total = sum(by_status.values())
        if as_json:
            print_document(
                store,
                total=total,
                by_status=by_status,
                by_queue=dict(sorted(by_queue.items())),
                counts={s: dict(sorted(q.items())) for s, q in sorted(counts.items())},
            )
            return
        title = Text(printable(f"{total} run{'s' if total != 1 else ''} in {mask_url(store)}"))
        table = Table(title=title, title_justify="left", header_style="bold")
        table.add_column("queue", no_wrap=True)
        for name in by_status:
            table.add_column(name, justify="right", no_wrap=True)
        table.add_column("total", justify="right", no_wrap=True, style="bold")
        for name in sorted(by_queue):
            cells = [str(counts.get(s, {}).get(name, 0)) for s in by_status]
            table.add_row(Text(printable(name)), *cells, str(by_queue[name]))
        if len(by_queue) != 1:
            table.add_row("all", *(str(n) for n in by_status.values()), str(total), style="bold")
        print_table(table)

    execute(go)


def cancel_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.", metavar="RUN")],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Cancel a run: at once if nobody executes it, else at its next await."""

    async def go() -> None:
        async with runner_for(store) as runner:
            before = await get_run(runner, run_id)
            if before.status == "cancelled":
                console().print(f"run {lit(run_id)} was already cancelled")
                return
            if before.status in ("succeeded", "failed"):
                raise CLIError(f"run {run_id!r} has already finished ({before.status})")
            await runner.cancel(run_id)
            after = await get_run(runner, run_id)
        if after.status == "cancelled":
            console().print(f"cancelled run {lit(run_id)}")
        else:
            console().print(
                f"cancel requested: run {lit(run_id)} is {lit(after.status)} on "
                f"{lit(after.owner or '?')}; it stops at its next await, within a heartbeat"
            )

    execute(go)


def prune_runs(
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Delete finished runs older than this: 7d, 12h, 30m.",
        ),
    ] = None,
    keep: Annotated[
        int | None, typer.Option("--keep", min=0, help="Keep only the N most recent finished runs.")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            metavar="KEY=VALUE",
            help="Only runs with this tag (repeat it: every one must match; --keep counts those).",
        ),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Delete finished runs (and their steps and signals) by age or count."""
    if older_than is None and keep is None:
        fail("say what to prune: --older-than 7d, --keep N, or both", 2)
    try:
        seconds = None if older_than is None else parse_duration(older_than)
        tags = parse_tags(tag)
    except CLIError as exc:
        fail(str(exc), exc.code)

    async def go() -> None:
        async with runner_for(store) as runner:
            count = await runner.prune(older_than=seconds, keep=keep, tags=tags)
        console().print(f"pruned {count} finished run{'s' if count != 1 else ''}")

    execute(go)
