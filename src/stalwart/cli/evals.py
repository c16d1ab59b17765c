"""``stalwart evals counterfactual``: recorded runs forked at a step onto new
code, scored old against new; ``stalwart evals run``: a saved dataset run
against a policy (:mod:`stalwart.evals`).

The new policy, the judge and every scorer are named, never imported from
the store (S13): policies by their names among those ``--app`` provides,
scorers among the ready ones.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ..core.errors import CLIError
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
    runner_for,
)
from .fork import parse_json

if TYPE_CHECKING:
    from ..evals import ExperimentReport, Report, Scorer

__all__ = ["counterfactual_runs", "run_experiment", "when"]

_SCORERS = "exact, json, tokens, tool:NAME"

# The options both commands take, declared once.
_ScorerOption = Annotated[
    list[str] | None,
    typer.Option("--scorer", metavar="NAME", help=f"A ready scorer: {_SCORERS} (repeatable)."),
]
_JudgeOption = Annotated[
    str | None,
    typer.Option("--judge", metavar="NAME", help="A model policy of --app as an LLM judge."),
]
_FailIfWorseOption = Annotated[
    int | None,
    typer.Option("--fail-if-worse", metavar="N", min=0, help="Exit 1 if more than N are worse."),
]


def _scorers(names: list[str], judge_name: str | None, policies: dict[str, Any]) -> list[Scorer]:
    from ..evals import called_tool, exact_match, json_match, judge, tokens_used

    ready: dict[str, Scorer] = {"exact": exact_match, "json": json_match(), "tokens": tokens_used}
    out: list[Scorer] = []
    for name in names:
        if name.startswith("tool:") and len(name) > 5:
            out.append(called_tool(name[5:]))
        elif name in ready:
            out.append(ready[name])
        else:
            raise CLIError(f"--scorer {name!r} is not one of {_SCORERS}", code=2)
    if judge_name is not None:
        if judge_name not in policies:
            raise CLIError(f"--judge {judge_name!r}: --app has no policy of that name", code=2)
        out.append(judge(policies[judge_name]))
    return out


def when(text: str | None, flag: str) -> float | None:
    """An ISO 8601 time option as seconds since the epoch (None if not given)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise CLIError(
            f"{flag} {text!r} is not an ISO 8601 time (2026-11-28T16:00)", code=2
        ) from None


def counterfactual_runs(
    app: AppOption,
    policy: Annotated[
        str,
        typer.Option("--policy", metavar="NAME", help="The new code: a policy of --app, by name."),
    ],
    at: Annotated[
        str,
        typer.Option(
            "--at",
            metavar="STEP",
            help="Where each fork runs live from: a step key, or a rule such as "
            "'2nd model step', 'first call of tool lookup', 'last model step'.",
        ),
    ],
    run: Annotated[
        list[str] | None,
        typer.Option("--run", metavar="ID", help="A recorded run to fork (repeatable)."),
    ] = None,
    of: Annotated[
        str | None,
        typer.Option(
            "--of", metavar="NAME", help="Else fork the runs of this policy (default: --policy)."
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", metavar="TIME", help="Runs created from TIME (ISO).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", metavar="TIME", help="Runs created before TIME.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, help="At most N runs (newest).")
    ] = 100,
    result: Annotated[
        str | None,
        typer.Option(
            "--result", metavar="JSON", help="Also replace step --at's result (as `runs fork`)."
        ),
    ] = None,
    scorer: _ScorerOption = None,
    judge_name: _JudgeOption = None,
    experiment: Annotated[
        str | None,
        typer.Option(
            "--experiment",
            metavar="NAME",
            help="Names the forks (RUN.NAME); the same name finds them again after a crash.",
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", metavar="N", min=1, help="Forks at once.")
    ] = 4,
    fail_if_worse: _FailIfWorseOption = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Fork recorded runs at a step onto new code and score old against new.

    Everything before --at is replayed from the ledger (no model is called
    for it); each fork is a durable run named RUN.EXPERIMENT, so running the
    command again pays nothing for finished forks. Exit code 1 when more
    than --fail-if-worse cases are worse.
    """
    from ..evals import Selection, counterfactual
    from ..timetravel import Replace

    async def go() -> Report:
        provided = app_policies(app)
        by_name = {p.name: p for p in provided}
        if policy not in by_name:
            shown = ", ".join(sorted(by_name)[:12])
            raise CLIError(f"--policy {policy!r}: --app {app!r} has {shown}", code=2)
        scorers = _scorers(scorer or ["exact"], judge_name, by_name)
        replace = None if result is None else Replace(result=parse_json(result, "--result"))
        selection = Selection(
            ids=run or (),
            policy=of or policy,
            since=when(since, "--since"),
            until=when(until, "--until"),
            limit=limit,
        )
        async with runner_for(store, provided) as runner:
            return await counterfactual(
                runner,
                selection,
                at=at,
                policy=by_name[policy],
                replace=replace,
                scorers=scorers,
                experiment=experiment,
                concurrency=concurrency,
            )

    report = execute(go)
    if as_json:
        print_document(store, **report.to_json())
    else:
        _print(report)
    if fail_if_worse is not None and report.count("worse") > fail_if_worse:
        raise typer.Exit(1)


def _print(report: Report) -> None:
    table = Table("RUN", "FORK", "AT", "VERDICT", "TOKENS NEW/OLD", "WHY")
    for c in report.cases:
        why = "; ".join(f"{n}: {s.reason}" for n, s in c.scores.items() if s.verdict != "same")
        table.add_row(
            lit(c.run_id),
            lit(c.fork_id),
            lit(c.at),
            c.verdict,
            f"{c.new_tokens}/{c.old_tokens}",
            lit(why),
        )
    print_table(table)
    screen = console()
    screen.soft_wrap = True
    for run_id, why in report.skipped.items():
        screen.print(lit(f"skipped {run_id}: {why}"))
    screen.print(lit(report.summary()))


def run_experiment(
    app: AppOption,
    dataset: Annotated[
        str, typer.Option("--dataset", metavar="NAME", help="A dataset saved in the store.")
    ],
    policy: Annotated[
        str,
        typer.Option("--policy", metavar="NAME", help="The code to run: a policy of --app."),
    ],
    experiment: Annotated[
        str,
        typer.Option(
            "--experiment",
            metavar="NAME",
            help="Names the experiment's run (eval:NAME); the same name resumes it.",
        ),
    ],
    version: Annotated[
        int | None, typer.Option("--version", metavar="N", min=1, help="Default: the latest.")
    ] = None,
    scorer: _ScorerOption = None,
    judge_name: _JudgeOption = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", metavar="N", min=1, help="Cases at once.")
    ] = 4,
    queue: Annotated[
        str | None,
        typer.Option("--queue", metavar="NAME", help="Run the cases on this queue's workers."),
    ] = None,
    fail_if_worse: _FailIfWorseOption = None,
    min_pass: Annotated[
        float | None,
        typer.Option(
            "--min-pass",
            metavar="RATE",
            min=0.0,
            max=1.0,
            help="Exit 1 if fewer than RATE (0 to 1) of the cases pass (none worse).",
        ),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Run a saved dataset's cases against a policy and score each one.

    Each case is a durable child run of the experiment's run; running the
    command again with the same --experiment resumes it, and no finished
    case is run again. A case passes unless a scorer says it is worse than
    its reference. Exit code 1 when --fail-if-worse or --min-pass is not met.
    """
    from ..evals import DatasetStore
    from ..evals import experiment as run_cases

    async def go() -> ExperimentReport:
        provided = app_policies(app)
        by_name = {p.name: p for p in provided}
        if policy not in by_name:
            shown = ", ".join(sorted(by_name)[:12])
            raise CLIError(f"--policy {policy!r}: --app {app!r} has {shown}", code=2)
        scorers = _scorers(scorer or ["exact"], judge_name, by_name)
        async with runner_for(store, provided) as runner:
            try:
                cases = await DatasetStore(runner.store).load(dataset, version)
            except KeyError as exc:
                raise CLIError(f"--dataset: {exc.args[0]}", code=1) from None
            try:
                return await run_cases(
                    runner,
                    cases,
                    by_name[policy],
                    name=experiment,
                    scorers=scorers,
                    concurrency=concurrency,
                    queue=queue,
                )
            except ValueError as exc:
                raise CLIError(str(exc), code=2) from None

    report = execute(go)
    if as_json:
        print_document(store, **report.to_json())
    else:
        _print_experiment(report)
    failed = fail_if_worse is not None and report.count("worse") > fail_if_worse
    if failed or (min_pass is not None and report.pass_rate < min_pass):
        raise typer.Exit(1)


def _print_experiment(report: ExperimentReport) -> None:
    table = Table("CASE", "RUN", "STATUS", "VERDICT", "TOKENS", "WHY")
    for c in report.cases:
        why = "; ".join(f"{n}: {s.reason}" for n, s in c.scores.items() if s.verdict != "same")
        table.add_row(lit(c.case_id), lit(c.run_id), c.status, c.verdict, str(c.tokens), lit(why))
    print_table(table)
    screen = console()
    screen.soft_wrap = True
    screen.print(lit(report.summary()))
