"""The deploy gate: replay the runs new code would resume before it resumes them.

A durable run resumed by new code replays its ledger through that code (S2):
if the new code makes another call where the run recorded one (another
policy, other arguments, another order), the run fails with a
:class:`~stalwart.NonDeterminismError` in production, after the deploy.
:func:`check_deploy` finds that out before: it replays, against the new
code and executing nothing live (:func:`stalwart.testing.replay_async`'s
machinery), every run a worker of the new code could pick up (pending,
running and suspended runs) and a sample of each policy's recent finished
runs, and reports for each run whether the new code reproduces it or where
it first leaves the record, with the fix.

An unfinished run that the new code cannot continue *blocks* the deploy
(:attr:`DeployReport.ok` is false; ``stalwart deploy check`` exits 1): it
would fail once resumed. A finished run that replays differently does not
block by default, since it will never be resumed and a change of behaviour
is often the point of the deploy; ``strict=True`` blocks on those too.

With ``clear=True`` the gate also records its verdicts for the workers:
each unfinished run the new code reproduces is *cleared* for the new code's
version (``version``, or the code version of the run's policy in the new
code), so a worker of the new version may continue it
(:mod:`stalwart.runner.routing`); the others stay with workers of the
version they started on.

Nothing read from the store decides what is called: a run is replayed only
under the policy of the new code that has its recorded name (S13).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from .core.errors import StalwartError
from .core.ledger import TERMINAL, RunRecord
from .core.policy import Policy, as_policy
from .runner.versions import code_version
from .stores import open_store
from .stores.base import Store
from .testing.divergence import Divergence
from .testing.recording import Recording
from .testing.replay import replay_async
from .timetravel.export import export_runs

__all__ = ["DeployReport", "RunCheck", "check_deploy", "check_run"]

#: The runs a worker of the new code could pick up and resume.
UNFINISHED = ("pending", "running", "suspended")
#: How many unfinished runs one read of the store lists at a time.
_PAGE = 500

Verdict = Literal["compatible", "diverges", "no-policy", "unreadable", "stuck"]


@dataclass(frozen=True)
class RunCheck:
    """What replaying one run against the new code found.

    ``verdict``: ``compatible`` (the new code reproduces every recorded
    step), ``diverges`` (it leaves the record at ``step``: ``recorded`` is
    what the run did, ``now`` what the new code does), ``no-policy`` (the
    new code has no policy of the run's name), ``unreadable`` (the record
    cannot be read back, ``why`` says why) or ``stuck`` (the replay did not
    end in time: the new code waits on something that is not a step).
    """

    run_id: str
    policy: str
    status: str
    verdict: Verdict
    step: str | None = None
    recorded: str | None = None
    now: str | None = None
    why: str = ""
    fix: str = ""
    #: The version the run was cleared for (``check_deploy(clear=True)``).
    cleared_for: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def blocks(self, strict: bool = False) -> bool:
        """Whether this run stops the deploy: an unfinished run the new code
        cannot continue (or, ``strict``, any run it does not reproduce)."""
        return self.verdict != "compatible" and (strict or not self.finished)


@dataclass
class DeployReport:
    """Every run checked, unfinished runs first; true when nothing blocks."""

    store: str
    runs: list[RunCheck] = field(default_factory=list)
    strict: bool = False

    @property
    def blocking(self) -> list[RunCheck]:
        return [r for r in self.runs if r.blocks(self.strict)]

    @property
    def ok(self) -> bool:
        return not self.blocking

    def __bool__(self) -> bool:
        return self.ok

    def counts(self) -> dict[str, int]:
        """How many runs got each verdict, and how many block."""
        found = {v: 0 for v in ("compatible", "diverges", "no-policy", "unreadable", "stuck")}
        for r in self.runs:
            found[r.verdict] += 1
        return {**found, "blocking": len(self.blocking)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "strict": self.strict,
            "counts": self.counts(),
            "runs": [{**asdict(r), "blocks": r.blocks(self.strict)} for r in self.runs],
        }

    def __str__(self) -> str:
        c = self.counts()
        head = (
            f"{len(self.runs)} runs checked: {c['compatible']} compatible, "
            f"{c['diverges']} diverge, {c['no-policy']} without a policy, "
            f"{c['unreadable']} unreadable, {c['stuck']} stuck; "
            + ("nothing blocks the deploy" if self.ok else f"{c['blocking']} block the deploy")
        )
        lines = [head]
        for r in self.blocking:
            lines.append(f"run {r.run_id!r} ({r.policy}, {r.status}): {r.verdict}")
            if r.step is not None:
                lines.append(f"    at step {r.step}: {r.why}")
            elif r.why:
                lines.append(f"    {r.why}")
            if r.recorded is not None:
                lines.append(f"    recorded: {r.recorded}")
            if r.now is not None:
                lines.append(f"    now:      {r.now}")
            if r.fix:
                lines.append(f"    fix: {r.fix}")
        return "\n".join(lines)


async def check_deploy(
    store: Store | str,
    policies: Iterable[Any],
    *,
    finished: int = 20,
    strict: bool = False,
    timeout: float = 30.0,
    clear: bool = False,
    version: str | None = None,
) -> DeployReport:
    """Replay the store's unfinished runs, and the ``finished`` latest
    finished runs of each of ``policies``, against ``policies`` (the new
    code); report each run's verdict.

    ``store`` is a store or its URL (opened and closed here). ``policies``
    are the new code's policies (functions, agents, flows: anything
    ``Runner(policies=...)`` takes); a run is replayed under the one with
    its recorded name. Executes nothing live and, unless ``clear``, writes
    nothing. A run whose replay has not ended after ``timeout`` seconds is
    ``stuck``. With ``clear``, each unfinished ``compatible`` run is cleared
    for ``version`` (the new code's application version, as its workers are
    given it with ``--version``), or, without one, for the code version of
    its policy in the new code (see the module's docstring).
    """
    if finished < 0:
        raise ValueError(f"finished must be 0 or more, not {finished}")
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout}")
    by_name: dict[str, Policy[Any, Any]] = {}
    for p in policies:
        pol = as_policy(p)
        by_name.setdefault(pol.name, pol)
    opened = isinstance(store, str)
    st = open_store(store) if isinstance(store, str) else store
    if opened:
        await st.open()
    try:
        report = DeployReport(st.url, strict=strict)
        read_at = time.time()
        for run in await _unfinished(st):
            found = await _check(st, run, by_name, timeout)
            if clear and found.verdict == "compatible":
                to = version if version is not None else code_version(by_name[run.policy])
                found = await _clear(st, run, to, found, read_at)
            report.runs.append(found)
        if finished:
            for name in by_name:
                for run in await st.list_runs("succeeded", finished, policy=name):
                    report.runs.append(await _check(st, run, by_name, timeout))
        return report
    finally:
        if opened:
            await st.close()


async def _clear(
    store: Store, run: RunRecord, to: str, found: RunCheck, read_at: float
) -> RunCheck:
    """Clear ``run`` for ``to`` if the replay saw every step it will have
    before its next claim: not while a live worker held it (that worker
    records more steps under the same fence), and not once a worker has
    taken it since it was read (its fence moved on)."""
    if run.status == "running" and (run.lease_expires_at or 0) >= read_at:
        return replace(
            found,
            why=f"not cleared: worker {run.owner!r} was executing it; "
            "check it again once it waits or ends",
        )
    if await store.clear_run(run.id, [to], fence=run.fence) is None:
        return replace(
            found, why="not cleared: a worker took it while it was checked; check it again"
        )
    return replace(found, cleared_for=to)


async def check_run(
    store: Store, run_id: str, policies: Iterable[Any], *, timeout: float = 30.0
) -> RunCheck:
    """Replay one run against ``policies`` (new code), as :func:`check_deploy`
    replays each; :class:`~stalwart.RunNotFound` if there is no such run."""
    from .core.errors import RunNotFound

    run = await store.get_run(run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id!r} in {store.url}")
    by_name: dict[str, Policy[Any, Any]] = {}
    for p in policies:
        pol = as_policy(p)
        by_name.setdefault(pol.name, pol)
    return await _check(store, run, by_name, timeout)


async def _unfinished(store: Store) -> list[RunRecord]:
    """Every unfinished run, oldest first: listed a page at a time."""
    runs = [run for status in UNFINISHED async for run in store.iter_runs(status, page=_PAGE)]
    runs.sort(key=lambda r: (r.created_at, r.id))
    return runs


async def _check(
    store: Store, run: RunRecord, policies: dict[str, Policy[Any, Any]], timeout: float
) -> RunCheck:
    pol = policies.get(run.policy)
    if pol is None:
        return RunCheck(
            run.id,
            run.policy,
            run.status,
            "no-policy",
            why=f"the new code has no policy named {run.policy!r}",
            fix=(
                "keep a worker of the current version until the run ends, "
                "or give the new code this policy"
            ),
        )
    try:
        dumps = await export_runs(store, run.id, children=True)
        recording = Recording.of(dumps, run.id, f"{store.url} run {run.id}")
        async with asyncio.timeout(timeout):
            replayed = await replay_async(recording, pol)
    except TimeoutError:
        return RunCheck(
            run.id,
            run.policy,
            run.status,
            "stuck",
            why=f"the replay had not ended after {timeout:g} s: the new code awaits "
            "something that is not a step (a sleep, a network call) before its next step",
            fix="make that wait a step (ctx.sleep, a policy) or move it out of the policy",
        )
    except StalwartError as exc:  # a corrupted record, an undeclared type
        return RunCheck(run.id, run.policy, run.status, "unreadable", why=str(exc))
    if replayed.ok:
        return RunCheck(run.id, run.policy, run.status, "compatible")
    first = replayed.divergences[0]
    return RunCheck(
        run.id,
        run.policy,
        run.status,
        "diverges",
        step=first.key or None,
        recorded=first.recorded,
        now=first.now,
        why=_why(first, replayed.divergences),
        fix=_fix(first, run),
    )


def _why(first: Divergence, all_found: Sequence[Divergence]) -> str:
    text = first.describe().splitlines()[0].partition(": ")[2]
    return text + (f" ({first.note})" if first.note else "")


def _fix(first: Divergence, run: RunRecord) -> str:
    if first.kind == "outcome":
        return "the run ends differently with the new code (intended, if the change is)"
    where = f"step {first.key}" if first.key else "the start of the run"
    if run.status in TERMINAL:
        return f"the new code takes another path at {where} for these inputs"
    return (
        f'guard the change at {where} with `if await ctx.patched("<change name>"):` (the '
        "new path) so that runs recorded before it keep the old one, or let this run "
        "finish on workers of the current version"
    )
