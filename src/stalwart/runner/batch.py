"""Enqueueing: runs created on a queue for any worker, executed by none here.

One run (``Runner.enqueue``) is created idempotently by id (S13) and the
worker loop poked; a runner that does not serve the queue never executes it.

Many runs (``Runner.enqueue_many``): one ``enqueue`` costs a transaction (a
commit, a round trip) a run, so a producer of many small runs is as slow as
the workers draining them. :meth:`Enqueuer.many` validates every call first,
exactly as ``enqueue`` does, then creates all the runs with one
``Store.create_runs`` and wakes the worker loop once.

Idempotency is the same as ``enqueue``'s: each run id names one run (S13). An
id that exists, or that appears twice in the batch, must be the same call
(policy and inputs), or :class:`~stalwart.InputMismatchError` is raised. That
check needs the stored run, known only once the transaction has run, so a
refused id does not undo the new runs beside it: they are enqueued, and
sending the corrected batch again returns the same runs.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from ..core.ledger import RunRecord, check_run_id
from ..core.policy import Policy
from ..core.tags import encode_tags
from ..stores.base import Store
from .inputs import check_same_run, run_inputs
from .observe import started, trace_for
from .registry import Registry
from .table import RunTable, Settings
from .versions import code_version

__all__ = ["Enqueuer", "RunCall"]

# Enqueuer.many builds each RunRecord by position (keywords and default
# factories were a tenth of a batch's time, B11): refuse to load if the
# record's fields move, rather than put values in the wrong fields.
_BY_POSITION = (
    "id, policy, inputs, status, result, error, created_at, updated_at, code_version, "
    "wake_at, waiting_for, owner, lease_expires_at, fence, cancel_requested, queue, "
    "priority, parent_id, trace, tags, cleared"
)
if ", ".join(f.name for f in fields(RunRecord)) != _BY_POSITION:  # pragma: no cover
    raise ImportError("RunRecord's fields changed: update Enqueuer.many's record")


class RunCall:
    """One run of a batch: ``RunCall(policy, *args, run_id=None, **kwargs)``,
    spelled like the call ``enqueue`` takes, so moving a loop of enqueues to a
    batch changes no argument."""

    __slots__ = ("args", "kwargs", "run_id", "target")

    def __init__(self, target: Any, /, *args: Any, run_id: str | None = None, **kwargs: Any):
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.run_id = run_id

    def __repr__(self) -> str:
        name = getattr(self.target, "name", None) or getattr(self.target, "__name__", "?")
        return f"<RunCall {name} run_id={self.run_id!r}>"


class Enqueuer:
    """Creates runs on queues for a runner, one or many at a time."""

    def __init__(
        self, store: Store, table: RunTable, registry: Registry, settings: Settings
    ) -> None:
        self.store = store
        self.table = table
        self.registry = registry
        self.settings = settings

    async def one(
        self,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str,
        queue: str,
        priority: int,
        delay: float | None,
        tags: dict[str, str] | None = None,
    ) -> bool:
        """Create the run ``run_id`` of ``target`` on ``queue`` (checked
        values), or find it, refusing another call under its id; whether it
        was created."""
        pol = self.registry.register(target)
        inputs = run_inputs(pol, run_id, args, kwargs)
        hooks = self.settings.hooks
        rec = RunRecord(
            run_id,
            pol.name,
            inputs,
            code_version=self.settings.version_of(pol),
            queue=queue,
            priority=priority,
            wake_at=None if not delay else time.time() + delay,
            trace=trace_for(hooks, run_id, pol.name) if hooks else None,
            tags=encode_tags(tags),
        )
        stored, created = await self.store.create_run(rec)
        if not created:
            check_same_run(pol, stored, rec, self.registry.find(stored.policy) is pol)
        else:
            started(rec)
        self.table.wake_worker()
        return created

    async def many(
        self,
        calls: Iterable[RunCall],
        queue: str,
        priority: int,
        delay: float | None,
        tags: dict[str, str] | None = None,
    ) -> list[str]:
        """Put every call on ``queue`` as a run, in one transaction; the run
        ids in the order of ``calls`` (``queue``, ``priority`` and ``delay``
        checked by the runner). The worker loop is woken once, after the
        write, so a runner that serves ``queue`` starts on them at once."""
        registry = self.registry
        wake_at = None if not delay else time.time() + delay
        hooks = self.settings.hooks
        version = self.settings.code_version
        tag_text = encode_tags(tags)
        # Validate everything before writing anything: a call whose inputs cannot
        # be recorded fails the batch with no run created.
        given: list[tuple[Policy[Any, Any], RunRecord]] = []
        first: dict[str, tuple[Policy[Any, Any], RunRecord]] = {}
        records: list[RunRecord] = []
        target: Any = None
        pol: Policy[Any, Any] | None = None
        name = pol_version = ""
        clock = time.time
        for call in calls:
            if not isinstance(call, RunCall):
                raise TypeError(
                    f"enqueue_many takes RunCall(policy, *args, **kwargs), not {call!r}"
                )
            run_id = uuid.uuid4().hex if call.run_id is None else check_run_id(call.run_id)
            if pol is None or call.target is not target:  # a batch is mostly one policy
                target = call.target
                pol = registry.register(target)
                name = pol.name
                pol_version = version if version is not None else code_version(pol)
            now = clock()
            # Every field given by position: RunRecord's keywords and default
            # factories cost more than the rest of a run's record (B11).
            rec = RunRecord(
                run_id,
                name,
                run_inputs(pol, run_id, call.args, call.kwargs),
                "pending",
                None,  # result
                None,  # error
                now,  # created_at
                now,  # updated_at
                pol_version,
                wake_at,
                None,  # waiting_for
                None,  # owner
                None,  # lease_expires_at
                0,  # fence
                False,  # cancel_requested
                queue,
                priority,
                None,  # parent_id
                trace_for(hooks, run_id, name) if hooks else None,
                tag_text,
            )
            seen = first.get(run_id)
            if seen is None:
                first[run_id] = (pol, rec)
                records.append(rec)
            else:  # the same id twice in one batch: the same call, or refused
                check_same_run(pol, seen[1], rec, seen[0] is pol)
            given.append((pol, rec))
        existed = {r.id: r for r in await self.store.create_runs(records)} if records else {}
        for rec in records:
            if rec.id not in existed:
                started(rec)
        if records:
            self.table.wake_worker()
        for pol, rec in given:
            stored = existed.get(rec.id)
            if stored is not None:
                check_same_run(pol, stored, rec, registry.find(stored.policy) is pol)
        return [rec.id for _, rec in given]
