"""Awaiting a run's outcome and streaming its events, wherever it executes.

A run executing here settles a future; one executing elsewhere (another
worker, a later process) is read from the store, at first often and then
every ``poll_interval``, woken early when this process learns something: a
cancel it sent, or the store's word that a run settled elsewhere (the worker
loop then reads every awaited run in one query and wakes those that
finished). A store that is down is waited out for as long as the store
itself retries (its ``retry_for``, S14), never raised to the caller as if
the run had failed; a store still unreachable after that ends the wait with
:class:`StoreUnavailable` naming the run, the store and its last error (a
dropped database would otherwise keep the caller waiting for ever). The run
is not failed by it: it resumes when the store is back.

A run executing in this process publishes its events to listening queues; a
run executing elsewhere has only its final state, so a stream of it ends with
a :class:`~stalwart.core.events.RunFinished` read from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ..core import codec
from ..core.errors import CorruptedRecord, RunNotFound, StalwartError, StoreUnavailable
from ..core.events import Event, RunFinished
from ..core.ledger import TERMINAL, RunRecord
from ..core.recorded import error_from_json, recorded_outcome
from ..stores.base import Store
from .registry import Registry
from .table import RunTable

__all__ = ["Outcomes", "finished_event"]


class Outcomes:
    """A runner's outcomes and event streams of runs, here or anywhere else."""

    def __init__(self, store: Store, table: RunTable, registry: Registry) -> None:
        self.store = store
        self.table = table
        self.registry = registry

    async def _get_run(self, run_id: str) -> RunRecord:
        rec = await self.store.get_run(run_id)
        if rec is None:
            raise RunNotFound(f"no run {run_id!r}")
        return rec

    async def outcome(self, run_id: str) -> Any:
        """The run's result, or its error raised, waiting as long as needed;
        :class:`StoreUnavailable` if the store does not answer for its whole
        retry time."""
        return await _await_outcome(self, run_id)

    async def events(
        self, run_id: str, queue: asyncio.Queue[Any] | None = None
    ) -> AsyncIterator[Event]:
        """The run's events from now (or from ``queue``, listening since its
        start), ending with :class:`RunFinished`."""
        if queue is None:
            queue = asyncio.Queue()
            self.table.listeners.setdefault(run_id, []).append(queue)
        live = self.table.live.get(run_id)
        if live is not None and queue not in live.engine.listeners:
            live.engine.listen(queue)
        finisher = asyncio.create_task(self._finish_event(run_id, queue))
        try:
            while True:
                event = await queue.get()
                yield event
                if isinstance(event, RunFinished):
                    return
        finally:
            finisher.cancel()
            self.table.unlisten(run_id, queue)

    async def _finish_event(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        """Close the stream of a run that finishes elsewhere (or already has)."""
        while True:
            if run_id not in self.table.live:
                try:
                    rec = await self._get_run(run_id)
                except RunNotFound:
                    rec = None
                if rec is not None and rec.status in TERMINAL:
                    self.registry.declare_for(rec)
                    queue.put_nowait(finished_event(rec, self.table.kept.get(run_id)))
                    return
            await asyncio.sleep(self.table.poll_interval)


async def _await_outcome(outcomes: Outcomes, run_id: str) -> Any:
    """See :meth:`Outcomes.outcome`."""
    table, registry, store = outcomes.table, outcomes.registry, outcomes.store
    ephemeral, poll_interval = store.ephemeral, table.poll_interval
    delay = 0.01
    try:
        while True:
            # Watched before the store is read: word that the run settled,
            # arriving while we read, then ends the wait below at once.
            watcher = table.watchers.setdefault(run_id, asyncio.Event())
            watcher.clear()
            if table.watching is None:
                table.wake_worker()  # the loop starts taking the store's wake-ups
            live = table.live.get(run_id)
            if live is not None and not await _settled_or_store_down(live.done, watcher, table):
                pass  # the worker loop found the store down: read the run below
            elif live is not None:
                status, value = live.done.result()
                if status == "succeeded":
                    return value
                if status in ("failed", "cancelled"):
                    raise value
            kept = table.kept.get(run_id)
            if kept is not None:
                if kept[0] == "succeeded":
                    return kept[1]
                raise kept[1]
            try:
                rec: RunRecord | None = await outcomes._get_run(run_id)
            except StoreUnavailable as exc:
                # The store retried the read for its whole retry time: gone,
                # as far as this caller can tell. Say so rather than wait on.
                raise StoreUnavailable(
                    f"run {run_id!r}: its store {store.describe().get('url') or '(unnamed)'} "
                    "did not answer "
                    f"for its whole retry time, so the run's outcome cannot be read; "
                    f"the run is not failed and resumes once the store is back "
                    f"(await it again then). Last error: {exc}"
                ) from exc
            if rec is not None and rec.status in TERMINAL:
                registry.declare_for(rec)
                return recorded_outcome(run_id, rec.status, rec.result, rec.error)
            if rec is not None and ephemeral:
                raise RunNotFound(f"run {run_id!r} is {rec.status} and not executing here")
            if table.failed is not None and run_id not in table.live:
                # Nothing here will claim or wake the run any more.
                raise StalwartError(
                    f"run {run_id!r} is {rec.status if rec else 'not found'}, and this "
                    f"runner's worker loop stopped on a bug ({type(table.failed).__name__}: "
                    f"{table.failed}), so it cannot resume the run; another worker on the "
                    f"store can"
                ) from table.failed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await watcher.wait()
            delay = min(delay * 2, poll_interval)
    finally:
        table.watchers.pop(run_id, None)  # no Event left behind per awaited run


async def _settled_or_store_down(
    done: asyncio.Future[tuple[str, Any]], watcher: asyncio.Event, table: RunTable
) -> bool:
    """Wait for a live run to settle (True), or for the worker loop's word that
    the store stopped answering (False): a run busy in its own code (a long
    sleep) may not touch the store for a long time."""
    if done.done():
        return True
    if table.store_down is not None:
        return False
    while True:
        woken: asyncio.Future[Any] = asyncio.ensure_future(watcher.wait())
        either: list[asyncio.Future[Any]] = [done, woken]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
        if done.done():
            return True
        watcher.clear()
        if table.store_down is not None:
            return False


def finished_event(rec: RunRecord, kept: tuple[str, Any] | None = None) -> RunFinished:
    """The :class:`RunFinished` of a finished run, from its record (or, for a
    run of an ephemeral store, from the outcome kept in this process)."""
    value: Any = None
    err = None
    if kept is not None:
        status, outcome = kept
        if status == "succeeded":
            return RunFinished(rec.id, rec.status, outcome, None)
        return RunFinished(rec.id, rec.status, None, f"{type(outcome).__name__}: {outcome}")
    try:
        if rec.result:
            value = codec.loads(rec.result, f"result of run {rec.id!r}")
        if rec.error:
            e = error_from_json(rec.error, f"error of run {rec.id!r}")
            err = f"{type(e).__name__}: {e}"
    except CorruptedRecord as exc:
        err = f"CorruptedRecord: {exc}"
    return RunFinished(rec.id, rec.status, value, err)
