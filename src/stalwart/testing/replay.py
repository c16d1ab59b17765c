"""Replay tests: run new code against a recorded run, executing nothing live.

``replay(recording, policy)`` executes ``policy`` from the top against the
record, as a resumed run would (S2), except that nothing may run live: every
call the new code makes must be answered from the record. The first call
that is not (another policy, other arguments, another order, a call the
record does not have) stops the replay, and the report names the step and
shows both sides; a record the new code never asked for, or another final
result, is reported too. Otherwise the new code reproduces the run.

The recording is read by :mod:`.recording`; :mod:`.guard` keeps the replay
offline; :mod:`.divergence` says where the new code left the record and
writes the report.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..core.engine.unwind import find_halt, find_suspend
from ..core.ledger import TERMINAL
from ..core.policy import as_policy
from ..runner.inputs import read_inputs
from .divergence import Divergence, ReplayReport, first_missing, outcome_divergences
from .guard import Guard
from .recording import load_recording

__all__ = ["replay", "replay_async"]


def replay(recording: Any, policy: Any, *, run_id: str | None = None) -> ReplayReport:
    """Replay ``recording`` (:func:`load_recording`'s sources) through
    ``policy`` and report; from synchronous code (a test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(replay_async(recording, policy, run_id=run_id))
    raise RuntimeError("replay() cannot run inside an event loop; await replay_async(...)")


async def replay_async(recording: Any, policy: Any, *, run_id: str | None = None) -> ReplayReport:
    """:func:`replay`, awaited."""
    rec = await load_recording(recording, run_id)
    pol = as_policy(policy)
    pol.declare_types()
    guard = Guard(rec)
    x = guard.engine()
    data = read_inputs(rec.run.id, rec.run.inputs)
    report = ReplayReport(rec.run.id, rec.source, pol.name, [], [])
    outcome: tuple[str, Any] = ("succeeded", None)
    try:
        outcome = ("succeeded", await x.run_root(pol, tuple(data["args"]), data["kwargs"]))
    except BaseException as exc:
        halt, suspend = find_halt(exc), find_suspend(exc)
        if halt is not None:
            guard.read_halt(halt, report)
        elif suspend is not None:
            if rec.run.status in TERMINAL:
                report.divergences.append(
                    Divergence(
                        "extra", "", None, "suspends", "the new code waits where the run went on"
                    )
                )
            else:
                report.ended_at = guard.last_key
        elif isinstance(exc, Exception):
            outcome = ("failed", exc)
        else:
            raise
    report.replayed = _unique(guard.seen)
    if report.divergences or report.ended_at is not None or rec.run.status not in TERMINAL:
        if not report.divergences and report.ended_at is None:
            report.ended_at = guard.last_key
        return report
    report.divergences += first_missing(rec, guard.seen)
    report.divergences += outcome_divergences(rec.run, outcome)
    return report


def _unique(keys: list[str]) -> list[str]:
    return list(dict.fromkeys(keys))
