"""Streams of a run's events, for a run executing here or anywhere else.

A run executing in this process publishes its events to listening queues; a
run executing elsewhere has only its final state, so a stream of it ends with
a :class:`~stalwart.core.events.RunFinished` read from the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..core import codec
from ..core.errors import CorruptedRecord, RunNotFound
from ..core.events import Event, RunFinished
from ..core.ledger import TERMINAL, RunRecord
from ..core.recorded import error_from_json
from .registry import Registry
from .table import RunTable

__all__ = ["Streams", "finished_event"]


class Streams:
    """Yields a run's events from this process, and its end from the store."""

    def __init__(
        self,
        table: RunTable,
        registry: Registry,
        get_run: Callable[[str], Awaitable[RunRecord]],
    ) -> None:
        self.table = table
        self.registry = registry
        self._get_run = get_run

    async def events(
        self, run_id: str, queue: asyncio.Queue[Any] | None = None
    ) -> AsyncIterator[Event]:
        """The run's events from now (or from ``queue``, listening since its
        start), ending with :class:`RunFinished`."""
        if queue is None:
            queue = asyncio.Queue()
            self.table.listeners.setdefault(run_id, []).append(queue)
        live = self.table.live.get(run_id)
        if live is not None and queue not in live.execution.listeners:
            live.execution.listen(queue)
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
