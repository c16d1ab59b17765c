"""Experiments: a dataset run against a policy as durable child runs, each
case scored against its reference.

``await experiment(runner, dataset, support_v2, name="v2")`` starts one
durable run, ``eval:<name>``, of a policy that starts a child run of
``support_v2`` for each case (:meth:`~stalwart.core.context.Context.spawn`;
a ``queue`` spreads them over every worker of it), at most ``concurrency``
at a time, in the cases' order. A child that fails is a case that failed:
its error is its outcome, scored, never the experiment's. The experiment
run is durable like any other: after a crash, calling again with the same
name resumes it by replay, so a finished child is read, not run again (no
model is paid twice), and the unfinished ones go on.

Then each case's child run is scored against the case's reference
(:meth:`~.dataset.DatasetCase.reference`) with the scorers (:mod:`.scorers`)
and the scores are kept beside the dataset, one memory row a case
(``("stalwart.evals", "experiment", NAME)``); a :class:`~.scorers.Judge`
asks its model in a durable run of its own per case, once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.context import Context
from ..core.errors import InputMismatchError, RunNotFound
from ..core.ledger import RunRecord, StepRecord
from ..core.memory import MemoryRecord, namespace_text
from ..core.policy import Policy, as_policy, policy
from ..llm import run_usage
from ..runner.runner import Runner
from .dataset import Dataset, DatasetCase, check_name
from .dataset_store import RESERVED
from .scorers import Judge, Outcome, Score, Scorer, Verdict, exact_match, score_all

__all__ = ["CaseResult", "ExperimentReport", "experiment"]


@dataclass(frozen=True)
class CaseResult:
    """One case of an experiment: its id, the child run that ran it, that
    run's status, the combined verdict (worse if any scorer says worse,
    better if any says better and none worse), each scorer's score, and the
    tokens the child run used (recorded usage)."""

    case_id: str
    run_id: str
    status: str
    verdict: Verdict
    scores: dict[str, Score]
    tokens: int

    @property
    def passed(self) -> bool:
        """No scorer said worse."""
        return self.verdict != "worse"

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case_id,
            "run_id": self.run_id,
            "status": self.status,
            "verdict": self.verdict,
            "passed": self.passed,
            "tokens": self.tokens,
            "scores": {n: s.to_json() for n, s in self.scores.items()},
        }


@dataclass(frozen=True)
class ExperimentReport:
    """An experiment's cases in the dataset's order: which experiment, the
    dataset (name and version) and the policy it ran."""

    experiment: str
    dataset: str
    version: int
    policy: str
    cases: list[CaseResult] = field(default_factory=list)

    def count(self, verdict: Verdict) -> int:
        return sum(c.verdict == verdict for c in self.cases)

    @property
    def pass_rate(self) -> float:
        """The share of cases no scorer called worse (1.0 with no cases)."""
        return sum(c.passed for c in self.cases) / len(self.cases) if self.cases else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "dataset": self.dataset,
            "version": self.version,
            "policy": self.policy,
            "cases_total": len(self.cases),
            "better": self.count("better"),
            "worse": self.count("worse"),
            "same": self.count("same"),
            "pass_rate": self.pass_rate,
            "cases": [c.to_json() for c in self.cases],
        }

    def summary(self) -> str:
        """``experiment v2 (support_v2 on tickets v1): 50 case(s), 3 better,
        1 worse, 46 same, 98% passed``."""
        return (
            f"experiment {self.experiment} ({self.policy} on {self.dataset} v{self.version}): "
            f"{len(self.cases)} case(s), {self.count('better')} better, "
            f"{self.count('worse')} worse, {self.count('same')} same, "
            f"{self.pass_rate:.0%} passed"
        )

    def table(self) -> str:
        """The cases as a text table, then the summary."""
        rows = [("case", "status", "verdict", "tokens", "why")]
        for c in self.cases:
            why = "; ".join(f"{n}: {s.reason}" for n, s in c.scores.items() if s.verdict != "same")
            rows.append((c.case_id, c.status, c.verdict, str(c.tokens), why))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = [
            "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False)) + "  " + r[4]
            for r in rows
        ]
        lines.append(self.summary())
        return "\n".join(line.rstrip() for line in lines)


def _experiment_policy(target: Policy[Any, Any]) -> Policy[Any, list[str]]:
    """The policy of an experiment's own run for ``target``: it starts a child
    run of ``target`` a case, ``concurrency`` at a time in order, and returns
    their ids. A failed child is not its failure."""

    @policy(name=f"stalwart.evals.experiment:{target.name}")
    async def run_cases(ctx: Context, cases: list[dict[str, Any]], concurrency: int,
                        queue: str | None = None) -> list[str]:  # fmt: skip
        ids: list[str] = []
        # In waves of ``concurrency``, each started in one step and awaited
        # in one: the experiment's run suspends (and replays from the top
        # when woken) once a wave, by the wave's last child, and replays two
        # records a wave, not two a case.
        for lo in range(0, len(cases), concurrency):
            calls = [(c["args"], c["kwargs"]) for c in cases[lo : lo + concurrency]]
            wave = await ctx.spawn_many(target, calls, queue=queue)
            # A case that failed: its run's error is scored, not raised here.
            await ctx.results(wave, return_exceptions=True)
            ids += [c.run_id for c in wave]
        return ids

    return run_cases


async def experiment(
    runner: Runner,
    dataset: Dataset,
    policy: Any,
    *,
    name: str,
    scorers: Sequence[Scorer] = (exact_match,),
    concurrency: int = 4,
    queue: str | None = None,
) -> ExperimentReport:
    """Run every case of ``dataset`` (a saved version) under ``policy`` as a
    durable child run, at most ``concurrency`` at once (on ``queue``, for
    its workers, if given), and score each against its reference. ``name``
    names the experiment's run (``eval:<name>``); the same name resumes it,
    and another dataset or policy under it is refused."""
    check_name(name, "experiment")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if dataset.version < 1:
        raise ValueError(
            f"dataset {dataset.name!r} is not saved: an experiment runs a saved version "
            "(DatasetStore.save)"
        )
    target = runner.register(as_policy(policy))
    parent_name = f"stalwart.evals.experiment:{target.name}"
    parent = runner.find_policy(parent_name) or runner.register(_experiment_policy(target))
    for scorer in scorers:
        if isinstance(scorer, Judge):
            runner.register(scorer.policy)
    calls = []
    for c in dataset.cases:  # decoded into declared types only (S13)
        args, kwargs = c.call()
        calls.append({"args": list(args), "kwargs": kwargs})
    tags = {"stalwart.dataset": dataset.name, "stalwart.version": str(dataset.version)}
    try:
        handle = await runner.start(
            parent, calls, concurrency, queue, run_id=f"eval:{name}", tags=tags
        )
    except InputMismatchError as exc:
        raise InputMismatchError(
            f"experiment {name!r} was started on another dataset version, policy, "
            f"concurrency or queue; to resume it, call it as it was started, else name a "
            f"new experiment. {exc}"
        ) from None
    child_ids: list[str] = await handle.result()
    runs = {r.id: r for r in await runner.store.get_runs(child_ids)}
    slots = asyncio.Semaphore(concurrency)

    async def score(i: int, case: DatasetCase, run_id: str) -> CaseResult:
        run = runs.get(run_id)
        if run is None:
            raise RunNotFound(f"experiment {name!r}, case {case.id!r}: no run {run_id!r}")
        async with slots:  # scored side by side: the store groups their writes
            return await _score(runner, i, name, case, run, scorers)

    cases = zip(dataset.cases, child_ids, strict=True)
    results = await asyncio.gather(*(score(i, c, r) for i, (c, r) in enumerate(cases)))
    return ExperimentReport(name, dataset.name, dataset.version, target.name, list(results))


async def _steps(runner: Runner, run_id: str) -> list[StepRecord]:
    """A run's steps in the order they finished (none for a run not in the
    store: pruned, or another store's)."""
    found = await runner.store.load_steps(run_id)
    return sorted(found.values(), key=lambda s: (s.finished_at, s.key))


async def _score(
    runner: Runner,
    index: int,
    name: str,
    case: DatasetCase,
    run: RunRecord,
    scorers: Sequence[Scorer],
) -> CaseResult:
    steps = await _steps(runner, run.id)
    # A source pruned, or another store's: the reference is its result alone.
    source_steps = [] if case.source is None else await _steps(runner, case.source)
    old, new = case.reference(source_steps), Outcome.of(run, steps)
    judged = f"eval:{name}:{index}"
    scores, verdict = await score_all(runner, scorers, old, new, lambda name: f"{judged}:{name}")
    result = CaseResult(case.id, run.id, run.status, verdict, scores, run_usage(steps).total_tokens)
    now = time.time()
    await runner.store.memory_put(
        MemoryRecord(
            namespace_text((RESERVED, "experiment", name)),
            case.id,
            json.dumps({**result.to_json(), "index": index}, sort_keys=True),
            "",
            None,
            now,
            now,
        )
    )
    return result
