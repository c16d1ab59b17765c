"""Awaiting a run's outcome, wherever it executes.

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
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.errors import RunNotFound, StalwartError, StoreUnavailable
from ..core.ledger import TERMINAL, RunRecord
from ..core.recorded import recorded_outcome
from .registry import Registry
from .table import RunTable

__all__ = ["await_outcome"]


async def await_outcome(
    run_id: str,
    table: RunTable,
    registry: Registry,
    get_run: Callable[[str], Awaitable[RunRecord]],
    *,
    ephemeral: bool,
    poll_interval: float,
    store_url: str = "",
) -> Any:
    """The run's result, or its error raised, waiting as long as needed;
    :class:`StoreUnavailable` if the store does not answer for its whole
    retry time (``store_url``: the store as it is named, without password)."""
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
                rec: RunRecord | None = await get_run(run_id)
            except StoreUnavailable as exc:
                # The store retried the read for its whole retry time: gone,
                # as far as this caller can tell. Say so rather than wait on.
                raise StoreUnavailable(
                    f"run {run_id!r}: its store {store_url or '(unnamed)'} did not answer "
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
