"""Starting a run here: create it (idempotently by id), then claim and execute it.

``start()``, ``run()`` and ``stream()`` all come here. A run id is an
idempotency key: starting an id that exists returns that run if the policy
and inputs are the same, and resumes it here if nobody holds it, with the
children it left unfinished (a script killed and run again finishes its
run). Starting a run makes this runner an executor: it also takes over the
runs a dead process left running (S8).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..core.errors import InputMismatchError, SerializationError
from ..core.ledger import CHILD_MARK, TERMINAL, RunRecord
from ..core.tags import encode_tags
from ..stores.base import Store
from .driver import Call, Driver
from .inputs import check_same_run, run_inputs
from .observe import started, trace_for
from .registry import Registry
from .table import RunTable, Settings
from .worker import Worker

__all__ = ["Starter"]

#: Most unfinished children of a resumed run adopted at once.
ADOPT_LIMIT = 10_000


class Starter:
    """Creates runs and executes them in this runner."""

    def __init__(
        self,
        store: Store,
        table: RunTable,
        registry: Registry,
        driver: Driver,
        worker: Worker,
        settings: Settings,
    ) -> None:
        self.store = store
        self.table = table
        self.registry = registry
        self.driver = driver
        self.worker = worker
        self.settings = settings

    async def start(
        self,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str,
        *,
        settle: bool = True,
        tags: dict[str, str] | None = None,
    ) -> None:
        """Create the run and execute it here; with ``settle``, let it reach
        its first await before returning (a caller that awaits its outcome
        right after needs no such turn)."""
        pol = self.registry.register(target)
        memory = self.store.ephemeral
        try:
            inputs = run_inputs(pol, run_id, args, kwargs)
        except SerializationError:
            if not memory:
                raise
            inputs = ""  # in memory, inputs need not be JSON
        hooks = self.settings.hooks
        trace = trace_for(hooks, run_id, pol.name) if hooks else None
        version = self.settings.version_of(pol)
        rec = RunRecord(
            run_id, pol.name, inputs, code_version=version, trace=trace, tags=encode_tags(tags)
        )
        stored, created = await self.store.create_run(rec)
        if created:
            started(rec)
            if memory and not inputs:
                self.table.calls[run_id] = (args, kwargs)
        else:
            check_same_run(pol, stored, rec, self.registry.find(stored.policy) is pol)
            if memory and not inputs:
                self._check_same_call(run_id, (args, kwargs))
        if stored.status in TERMINAL:
            return
        self.worker.executor = not memory
        self.table.mine.add(run_id)
        if not created and not memory:
            await self._adopt_children(stored)
            if not await self.worker.may_continue(stored):
                return  # another version's run: its workers continue it, we await it
        await self.driver.claim_here(stored, pol, (args, kwargs) if memory else None)
        if settle:
            # Let the run reach its first await: starting many runs in a loop
            # then holds one at a time, not all of them at once (B7).
            await asyncio.sleep(0)

    def _check_same_call(self, run_id: str, call: Call) -> None:
        """One run id is one run, for inputs that are not JSON too (compared with ==)."""
        known = self.table.calls.get(run_id)
        try:
            same = known is not None and known == call
        except Exception:
            same = False
        if not same:
            raise InputMismatchError(
                f"run {run_id!r} exists with other inputs (inputs that are not JSON "
                "are compared with ==)"
            )

    async def _adopt_children(self, parent: RunRecord) -> None:
        """Make the unfinished child runs of a run resumed here our own, so a
        run whose process died while its children were pending finishes
        (children spawned into another queue stay with that queue's workers)."""
        prefix = f"{parent.id}{CHILD_MARK}"
        for rec in await self.store.list_runs(limit=ADOPT_LIMIT, id_contains=prefix):
            unfinished = rec.id.startswith(prefix) and rec.status not in TERMINAL
            if unfinished and rec.queue == parent.queue:
                self.table.mine.add(rec.id)
