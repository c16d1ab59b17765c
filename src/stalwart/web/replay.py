"""Where a run resumed, and which of its steps a later execution replayed.

A resumed run executes again from the top, and every call with a recorded
result returns it without executing (S2): those steps were recorded by an
earlier execution and replayed by a later one. The ledger does not record
which execution wrote a step (a step row keeps its key, times and attempts;
the run keeps only how many times it was claimed, its fence). So the
inspector marks what the records prove, and nothing it would have to guess:

* **a caller ran again**: a step that finished before the step that called
  it (``parent.n``) started. In one execution a call starts inside its
  caller, after it; a caller that starts later than its own call's record
  was executing when its run stopped (a crash, a lost lease, a suspension
  inside it) and ran again from the top on resume, reading that call from
  the ledger. The caller's new start is where the run resumed.
* **claimed again**: a run that is running on its second claim or later
  (its fence above 1): its row's ``updated_at`` is when the execution now
  holding it claimed it (heartbeats and steps do not move it).

A step is *replayed* when it finished before a later resume: from then on
it was read from the ledger, not executed. What the records cannot prove
is not marked: a finished run that resumed between two of its top-level
calls leaves times that look like one execution's with a pause (the
ledger would need the claim that recorded each step, which it does not
keep).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core.ledger import RunRecord, StepRecord

__all__ = ["Resume", "replayed", "resumes"]


@dataclass(frozen=True)
class Resume:
    """A point the run resumed at: when, which proof (``caller``: a caller
    ran again; ``claim``: the run's latest claim), and what it says."""

    at: float
    cause: str
    why: str


def _caller(key: str) -> str | None:
    """The key of the step whose code made the call at ``key`` (``1.2`` for
    ``1.2.3``); None for a top-level call, or an option call of a reply
    (``1#2``, made after the reply's step finished, not inside it)."""
    up, sep, last = key.rpartition(".")
    if not sep or "#" in last:
        return None
    return up


def _ran_again(steps: Mapping[str, StepRecord], key: str, since: float) -> StepRecord | None:
    """The outermost caller of the call at ``key`` that started after
    ``since`` (that call's record): it ran again, and so did each caller
    between; None if the call's own caller started before."""
    found = None
    up = _caller(key)
    while up is not None:
        caller = steps.get(up)
        if caller is None or caller.kind != "call" or not caller.started_at > since:
            break
        found, up = caller, _caller(up)
    return found


def resumes(run: RunRecord, steps: Mapping[str, StepRecord]) -> list[Resume]:
    """The points ``run`` resumed at that ``steps`` prove, in time order."""
    restarted: dict[str, StepRecord] = {}  # caller key: its latest call recorded before it
    for r in steps.values():
        caller = _ran_again(steps, r.key, r.finished_at)
        if caller is not None:
            seen = restarted.get(caller.key)
            if seen is None or r.finished_at > seen.finished_at:
                restarted[caller.key] = r
    found = []
    for key, child in restarted.items():
        caller = steps[key]
        why = (
            f"step {key} {caller.name} ran again: its call {child.key} "
            "was recorded before it started"
        )
        found.append(Resume(caller.started_at, "caller", why))
    if run.status == "running" and run.fence > 1 and not run.cancel_requested:
        found.append(Resume(run.updated_at, "claim", f"claimed again (claim {run.fence})"))
    return sorted(found, key=lambda m: m.at)


def replayed(rec: StepRecord, points: list[Resume]) -> Resume | None:
    """The first resume after ``rec`` was recorded (it was replayed from
    then on), or None: it was recorded by the latest execution."""
    return next((p for p in points if rec.finished_at < p.at), None)
