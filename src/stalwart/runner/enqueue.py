"""Enqueueing one run: created on a queue for any worker, executed by none here.

The run is created (idempotently by id, S13) and the worker loop poked; a
runner that does not serve the queue never executes it. Many runs at once:
:mod:`.batch`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..core.ledger import RunRecord
from ..core.policy import Policy
from .batch import Runner
from .handle import RunHandle
from .identity import check_same_run, run_inputs
from .observe import started, trace_for

__all__ = ["enqueue_run"]


async def enqueue_run(
    runner: Runner,
    target: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str,
    *,
    queue: str,
    priority: int,
    delay: float | None,
    version: Callable[[Policy[Any, Any]], str],
    wake: Callable[[], None],
) -> RunHandle:
    """Create the run ``run_id`` of ``target`` on ``queue`` (checked values),
    or find it, refusing another call under its id; its handle."""
    pol = runner.register(target)
    inputs = run_inputs(pol, run_id, args, kwargs)
    hooks = runner.hooks
    rec = RunRecord(
        run_id,
        pol.name,
        inputs,
        code_version=version(pol),
        queue=queue,
        priority=priority,
        wake_at=None if not delay else time.time() + delay,
        trace=trace_for(hooks, run_id, pol.name) if hooks else None,
    )
    stored, created = await runner.store.create_run(rec)
    if not created:
        check_same_run(pol, stored, rec, runner.find_policy(stored.policy) is pol)
    else:
        started(rec)
    wake()
    handle = RunHandle(runner, run_id)
    handle.created = created
    return handle
