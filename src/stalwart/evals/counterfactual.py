"""Counterfactual forks: recorded runs re-run from step ``at`` with something
replaced, scored old against new.

``await counterfactual(runner, Selection(policy="support"), at="2nd model
step", policy=support_v2)`` forks each selected run at the step ``at`` names
(:mod:`.at`), onto the new code (``policy``: another model, prompt or tool
version; the prefix rebased onto it, :mod:`stalwart.timetravel.rebase`) or
with a step's result replaced (``replace``). Everything before ``at`` is
replayed from the ledger: no model is called for it. Each fork is a durable
run named ``<run id>.<experiment>``: calling again after a crash finds the
finished forks and reads them (nothing is paid twice), resumes the unfinished
ones by replay, and forks the rest. Then each scorer (:mod:`.scorers`) says
better, worse or same, and the case's cost is the tokens of the fork's new
suffix against those of the whole original run. Each case is kept in the
store, a row a run under ``("stalwart.evals", "counterfactual", NAME)``,
for the inspector to show (:mod:`.compare`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ForkError, RunNotFound
from ..core.ledger import TERMINAL, RunRecord
from ..core.memory import MemoryRecord, namespace_text
from ..core.policy import Policy, as_policy
from ..llm import run_usage
from ..runner.handle import RunHandle
from ..runner.inputs import read_inputs
from ..runner.runner import Runner
from ..timetravel import Replace, before, fork, lineage
from .at import find_step
from .dataset_store import RESERVED
from .scorers import Judge, Outcome, Score, Scorer, Verdict, exact_match, score_all
from .selection import Selection, select_runs

__all__ = ["Case", "Report", "counterfactual"]


@dataclass(frozen=True)
class Case:
    """One recorded run against its fork: the step the fork left it at, the
    combined verdict (worse if any scorer says worse, better if any says
    better and none worse), each scorer's score, and the cost: tokens of
    the fork's new suffix, of the whole original run."""

    run_id: str
    fork_id: str
    at: str
    verdict: Verdict
    scores: dict[str, Score]
    new_tokens: int
    old_tokens: int
    status: str

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "fork_id": self.fork_id,
            "at": self.at,
            "verdict": self.verdict,
            "status": self.status,
            "new_tokens": self.new_tokens,
            "old_tokens": self.old_tokens,
            "scores": {n: s.to_json() for n, s in self.scores.items()},
        }


@dataclass(frozen=True)
class Report:
    """An experiment's cases, in the order of the runs, and the runs it
    skipped because they lack the step ``at`` names (with the reason)."""

    experiment: str
    cases: list[Case] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def count(self, verdict: Verdict) -> int:
        return sum(c.verdict == verdict for c in self.cases)

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "better": self.count("better"),
            "worse": self.count("worse"),
            "same": self.count("same"),
            "cases": [c.to_json() for c in self.cases],
            "skipped": dict(self.skipped),
        }

    def summary(self) -> str:
        """``20 case(s): 3 better, 1 worse, 16 same`` (and how many skipped)."""
        line = (
            f"{len(self.cases)} case(s): {self.count('better')} better, "
            f"{self.count('worse')} worse, {self.count('same')} same"
        )
        return line + (f", {len(self.skipped)} skipped" if self.skipped else "")

    def table(self) -> str:
        """The cases as a text table, then the totals."""
        rows = [("run", "fork", "at", "verdict", "tokens new/old", "why")]
        for c in self.cases:
            why = "; ".join(f"{n}: {s.reason}" for n, s in c.scores.items() if s.verdict != "same")
            rows.append(
                (c.run_id, c.fork_id, c.at, c.verdict, f"{c.new_tokens}/{c.old_tokens}", why)
            )
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = [
            "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False)) + "  " + r[5]
            for r in rows
        ]
        lines += [f"skipped {run_id}: {why}" for run_id, why in self.skipped.items()]
        lines.append(self.summary())
        return "\n".join(line.rstrip() for line in lines)


async def counterfactual(
    runner: Runner,
    runs: Selection | Sequence[str],
    *,
    at: str,
    policy: Any = None,
    replace: Replace | None = None,
    scorers: Sequence[Scorer] = (exact_match,),
    experiment: str | None = None,
    concurrency: int = 4,
) -> Report:
    """Fork each of ``runs`` (ids, or a :class:`Selection`) at ``at`` (a key,
    or a rule: ``"2nd model step"``, ``"first call of tool lookup"``) onto
    ``policy`` and/or with ``replace``, at most ``concurrency`` at once, and
    score each fork against its run. ``experiment`` names the forks
    (``<run id>.<experiment>``); the same name finds them again."""
    if policy is None and replace is None:
        raise ValueError(
            "a counterfactual changes something: pass policy=..., replace=..., or both"
        )
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    new_pol = None if policy is None else runner.register(as_policy(policy))
    name = experiment or f"cf-{new_pol.name if new_pol else 'replace'}"
    for scorer in scorers:
        if isinstance(scorer, Judge):
            runner.register(scorer.policy)
    selection = runs if isinstance(runs, Selection) else Selection(ids=list(runs))
    records = await select_runs(runner, selection)
    slots = asyncio.Semaphore(concurrency)
    skipped: dict[str, str] = {}
    keys: dict[str, str] = {}
    for run in records:  # every step resolved before any fork starts
        try:
            keys[run.id] = find_step(run.id, await runner.steps(run.id), at)
        except ForkError as exc:
            if selection.ids:  # a run named by id must have the step
                raise
            skipped[run.id] = str(exc)  # a selected one without it is said, not fatal

    kept = namespace_text((RESERVED, "counterfactual", name))

    async def one(index: int, run: RunRecord) -> Case | None:
        if run.id not in keys:
            return None
        async with slots:
            case = await _case(runner, run, keys[run.id], new_pol, replace, scorers, name)
            now = time.time()
            row = json.dumps({**case.to_json(), "index": index}, sort_keys=True)
            await runner.store.memory_put(MemoryRecord(kept, run.id, row, "", None, now, now))
            return case

    cases = await asyncio.gather(*(one(i, r) for i, r in enumerate(records)))
    return Report(name, [c for c in cases if c is not None], skipped)


async def _case(
    runner: Runner,
    run: RunRecord,
    key: str,
    pol: Policy[Any, Any] | None,
    replace: Replace | None,
    scorers: Sequence[Scorer],
    experiment: str,
) -> Case:
    old_steps = await runner.steps(run.id)
    fork_id = f"{run.id}.{experiment}"
    try:
        existing: RunRecord | None = await runner.get_run(fork_id)
    except RunNotFound:
        existing = None
    if existing is None:
        handle = await fork(
            runner,
            run.id,
            at=key,
            new_run_id=fork_id,
            replace=replace,
            policy=pol,
            rebase=pol is not None,
        )
        await _settle(runner, handle)
    else:
        origin = lineage(await runner.steps(fork_id))
        if origin is None or origin.run_id != run.id:
            raise ForkError(f"run {fork_id!r} exists and is not a fork of run {run.id!r}")
        if pol is not None and existing.policy != pol.name:
            raise ForkError(
                f"fork {fork_id!r} of run {run.id!r} runs policy {existing.policy!r}, not "
                f"{pol.name!r}: experiment {experiment!r} was another change; name this one"
            )
        if existing.status not in TERMINAL:  # left unfinished by a crash: resume it
            resumed = pol or runner.find_policy(existing.policy)
            if resumed is None:
                raise RunNotFound(
                    f"fork {fork_id!r} of run {run.id!r} is unfinished and runs policy "
                    f"{existing.policy!r}, which this runner was not given"
                )
            data = read_inputs(fork_id, existing.inputs)
            handle = await runner.start(resumed, *data["args"], run_id=fork_id, **data["kwargs"])
            await _settle(runner, handle)
    new_run = await runner.get_run(fork_id)
    new_steps = await runner.steps(fork_id)
    old, new = Outcome.of(run, old_steps), Outcome.of(new_run, new_steps)
    scores, verdict = await score_all(runner, scorers, old, new, lambda name: f"{fork_id}.{name}")
    prefix = {s.key for s in old_steps if before(s.key, key)}
    suffix = [s for s in new_steps if s.key != "0" and s.key not in prefix]
    return Case(
        run.id,
        fork_id,
        key,
        verdict,
        scores,
        run_usage(suffix).total_tokens,
        run_usage(old_steps).total_tokens,
        new_run.status,
    )


async def _settle(runner: Runner, handle: RunHandle) -> None:
    """Wait for a fork to end or suspend (new code that waits for a person
    or a signal: its case says ``suspended``, and nothing hangs); its
    failure is its outcome, scored."""
    waiting = asyncio.ensure_future(handle.result())
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=runner.poll_interval)
            if done:
                with contextlib.suppress(Exception):
                    waiting.result()
                return
            if (await runner.get_run(handle.run_id)).status == "suspended":
                return
    finally:
        waiting.cancel()  # only this wait: the run goes on where it is held
