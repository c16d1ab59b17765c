"""What a runner tells the people and tools watching it: log lines and run hooks.

Log records go to the ``stalwart.runner`` logger, one per moment in a run's
life that an operator asks about (started, claimed, resumed, recovered from a
dead holder, suspended, lease lost, finished), and warnings when the store is
slow or down. Each record carries its facts as attributes (``event``,
``run_id``, ``policy``, ``status``...), so a JSON formatter writes them as
fields rather than parsing the message. The run-level hooks
(:class:`~stalwart.core.events.Hook` ``start_trace``, ``on_run_start``,
``on_run_end``) are called from here too: that is what carries a run's trace
across processes. Nothing here runs when nobody listens: a disabled logger
is one level check per run, and no hook means no call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..core.events import Hook, RunInfo
from ..core.ledger import RunRecord

__all__ = [
    "SLOW_STORE",
    "claimed",
    "emit",
    "ended",
    "info_of",
    "run_ended",
    "run_started",
    "started",
    "trace_for",
]

log = logging.getLogger("stalwart.runner")

#: Seconds a store call of the worker loop (heartbeat, claims) may take
#: before it is logged as slow: past this, leases start to run short.
SLOW_STORE = 1.0


def emit(level: int, event: str, message: str, *args: Any, **fields: Any) -> None:
    """Log ``message`` with ``event`` and ``fields`` as record attributes.

    The check comes first so that a silent logger costs one comparison, not
    a dict and a record per run.
    """
    if log.isEnabledFor(level):
        log.log(level, message, *args, extra={"event": event, **fields})


def trace_for(hooks: Sequence[Hook], run_id: str, policy: str) -> str | None:
    """The trace context a new run keeps: the first hook's that gives one."""
    for hook in hooks:
        trace = hook.start_trace(run_id, policy)
        if trace is not None:
            return trace
    return None


def info_of(rec: RunRecord) -> RunInfo:
    return RunInfo(rec.id, rec.policy, rec.fence, rec.parent_id, rec.queue, rec.trace)


async def run_started(hooks: Sequence[Hook], info: RunInfo) -> None:
    """Tell hooks an execution begins. A failing hook is logged, never the
    run's failure: observing must not change what a run does."""
    for hook in hooks:
        try:
            await hook.on_run_start(info)
        except Exception:
            log.exception("hook %r failed in on_run_start of run %r", hook, info.run_id)


async def run_ended(
    hooks: Sequence[Hook], info: RunInfo, status: str, error: BaseException | None
) -> None:
    for hook in hooks:
        try:
            await hook.on_run_end(info, status, error)
        except Exception:
            log.exception("hook %r failed in on_run_end of run %r", hook, info.run_id)


def started(rec: RunRecord) -> None:
    """Log a run this runner created (started, enqueued or spawned)."""
    if not log.isEnabledFor(logging.INFO):
        return
    emit(
        logging.INFO,
        "run.started",
        "run %r (%s) started on queue %s",
        rec.id,
        rec.policy,
        rec.queue,
        run_id=rec.id,
        policy=rec.policy,
        queue=rec.queue,
        parent_id=rec.parent_id,
    )


def claimed(rec: RunRecord, prior: RunRecord | None, owner: str) -> None:
    """Log a claim, saying what it took over: a woken run (resumed), a run
    another holder left behind (recovered), or a plain claim."""
    if not log.isEnabledFor(logging.INFO):
        return
    fields = {"run_id": rec.id, "policy": rec.policy, "queue": rec.queue, "fence": rec.fence}
    if prior is not None and prior.status == "running" and prior.owner not in (None, owner):
        emit(
            logging.INFO,
            "run.recovered",
            "run %r (%s) recovered from %s, its holder dead or its lease lapsed",
            rec.id,
            rec.policy,
            prior.owner,
            previous_owner=prior.owner,
            **fields,
        )
    elif prior is not None and (prior.status == "suspended" or prior.fence > 0):
        # Suspended and due, or made ready by its signal or children: it ran before.
        emit(
            logging.INFO,
            "run.resumed",
            "run %r (%s) resumed (execution %d)",
            rec.id,
            rec.policy,
            rec.fence,
            waiting_for=prior.waiting_for,
            **fields,
        )
    else:
        emit(logging.INFO, "run.claimed", "run %r (%s) claimed", rec.id, rec.policy, **fields)


def ended(rec: RunRecord, status: str, value: Any, seconds: float) -> None:
    """Log how an execution ended: finished, suspended, handed back, or lost."""
    if not log.isEnabledFor(logging.INFO):
        return
    fields = {"run_id": rec.id, "policy": rec.policy, "status": status, "seconds": seconds}
    if status in ("succeeded", "failed", "cancelled"):
        error = None if status == "succeeded" else type(value).__name__
        emit(
            logging.INFO,
            "run.finished",
            "run %r (%s) %s in %.3f s%s",
            rec.id,
            rec.policy,
            status,
            seconds,
            "" if error is None else f": {error}",
            error_type=error,
            **fields,
        )
    elif status == "suspended":
        emit(logging.INFO, "run.suspended", "run %r (%s) suspended", rec.id, rec.policy, **fields)
    elif status == "released":
        emit(logging.INFO, "run.released", "run %r (%s) handed back", rec.id, rec.policy, **fields)
    else:
        cause = "" if value is None else f": {type(value).__name__}: {value}"
        emit(
            logging.WARNING,
            "run.stopped",
            "run %r (%s) stopped here%s; it resumes where its lease can be taken",
            rec.id,
            rec.policy,
            cause,
            **fields,
        )
