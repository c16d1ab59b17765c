"""Child runs: what an execution asks of its runner to spawn and await them.

:class:`Children` is the engine's :class:`~stalwart.core.engine.journal.Host`.
Children are runs like any other, in the parent's store; their ids derive
from the spawning step's key, so spawning again after a crash finds them
instead of starting them twice. A child spawned into the parent's queue is
this runner's own (it executes and resumes it without serving); one spawned
into another queue is left to the workers that serve that queue.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..core.engine.journal import Journal
from ..core.errors import CancelledRun
from ..core.events import Hook
from ..core.ledger import RunRecord
from ..core.policy import Policy
from ..stores.base import Store
from .identity import run_inputs
from .observe import started, trace_for
from .table import RunTable

__all__ = ["Children"]


def _no_policy(name: str) -> Policy[Any, Any] | None:
    return None


class Children:
    """Spawns child runs into the store and awaits them (in memory, directly)."""

    def __init__(
        self,
        store: Store,
        table: RunTable,
        register: Callable[[Any], Policy[Any, Any]],
        version: Callable[[Policy[Any, Any]], str],
        start_here: Callable[
            [RunRecord, Policy[Any, Any], tuple[Any, ...], dict[str, Any]], Awaitable[None]
        ],
        await_outcome: Callable[[str], Awaitable[Any]],
    ) -> None:
        self.store = store
        self.table = table
        self._register = register
        self._version = version
        self._start_here = start_here
        self._await_outcome = await_outcome
        #: The runner's hooks: each child keeps the trace context of the step
        #: that spawned it, so it joins that trace on whichever worker runs it.
        self.hooks: tuple[Hook, ...] = ()
        #: The runner's policies by name (its registry's ``find``): where an
        #: option offered by name (``options=["web_search"]``) is looked up
        #: after the calling step's application context.
        self.find_policy: Callable[[str], Policy[Any, Any] | None] = _no_policy

    async def spawn_children(
        self,
        parent: Journal,
        pol: Policy[Any, Any],
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        ids: list[str],
        queue: str | None,
        priority: int,
    ) -> None:
        self._register(pol)
        memory = self.store.ephemeral
        runs = [
            RunRecord(
                run_id,
                pol.name,
                "" if memory else run_inputs(pol, run_id, args, kwargs),
                code_version=self._version(pol),
                queue=queue or parent.queue,
                priority=priority,
                parent_id=parent.run_id,
                trace=trace_for(self.hooks, run_id, pol.name) if self.hooks else None,
            )
            for run_id, (args, kwargs) in zip(ids, calls, strict=True)
        ]
        if queue is None:
            self.table.mine.update(ids)
        await self.store.create_runs(runs)
        for rec in runs:
            started(rec)
        if memory:  # nobody else could ever execute them
            for rec, (args, kwargs) in zip(runs, calls, strict=True):
                await self._start_here(rec, pol, args, kwargs)
            return
        self.table.wake_worker()

    def live_execution(self, run_id: str) -> Journal | None:
        """The execution of ``run_id`` if this runner executes it now."""
        live = self.table.live.get(run_id)
        return None if live is None else live.execution

    def wake_worker(self) -> None:
        self.table.wake_worker()

    async def await_memory_children(self, ids: list[str]) -> list[dict[str, Any]]:
        """The children's outcomes, awaited in this process (an ephemeral store)."""
        outcomes: list[dict[str, Any]] = []
        for run_id in ids:
            try:
                value = await self._await_outcome(run_id)
            except CancelledRun:
                outcomes.append({"status": "cancelled"})
            except Exception as exc:
                outcomes.append({"status": "failed", "exception": exc})
            else:
                outcomes.append({"status": "succeeded", "value": value})
        return outcomes
