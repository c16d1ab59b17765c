"""The working parts of a :class:`~stalwart.Runner`, built and wired once.

The runner is a facade: each part owns one job (the table of runs live
here, child runs, the driver that executes a run, the worker loop, the
starter, event streams, schedules), and they call each other through the
references passed here, never through the runner. The runner's own methods
that a part calls back (starting a memory child, awaiting an outcome,
registering a policy, a policy's code version) are passed in as callables.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from ..core.events import Hook
from ..core.ledger import RunRecord
from ..core.policy import Policy
from ..stores.base import Store
from .children import Children
from .driver import Driver
from .registry import Registry
from .schedules import Schedules
from .starting import Starter
from .streams import Streams
from .table import RunTable
from .worker import Worker

__all__ = ["Parts", "assemble"]


class Parts(NamedTuple):
    """What a runner is made of (in the order they are built)."""

    table: RunTable
    children: Children
    driver: Driver
    worker: Worker
    starter: Starter
    streams: Streams
    schedules: Schedules


def assemble(
    store: Store,
    registry: Registry,
    *,
    hooks: Sequence[Hook],
    owner: str,
    lease: float,
    poll_interval: float,
    inline_sleep: float,
    max_parallel: int | None,
    queues: Sequence[str] | None,
    concurrency: int | None,
    serving: bool,
    schedule_clock: Callable[[], float] | None,
    register: Callable[[Any], Policy[Any, Any]],
    version: Callable[[Policy[Any, Any]], str],
    start_here: Callable[
        [RunRecord, Policy[Any, Any], tuple[Any, ...], dict[str, Any]], Awaitable[None]
    ],
    outcome: Callable[[str], Awaitable[Any]],
    get_run: Callable[[str], Awaitable[RunRecord]],
) -> Parts:
    """Build a runner's parts over ``store``, each given the others it uses."""
    hooks = tuple(hooks)
    table = RunTable(poll_interval)
    children = Children(store, table, register, version, start_here, outcome)
    children.hooks = hooks
    children.find_policy = registry.find
    driver = Driver(
        store,
        table,
        children,
        hooks=hooks,
        max_parallel=max_parallel,
        inline_sleep=inline_sleep,
    )
    worker = Worker(
        store,
        table,
        registry,
        driver,
        owner=owner,
        lease=lease,
        poll_interval=poll_interval,
        queues=queues,
        concurrency=concurrency,
        serving=serving,
    )
    starter = Starter(
        store,
        table,
        registry,
        driver,
        worker,
        owner=owner,
        lease=lease,
        hooks=hooks,
        version=version,
    )
    streams = Streams(table, registry, get_run)
    schedules = Schedules(
        store,
        registry,
        version=version,
        hooks=hooks,
        wake=table.wake_worker,
        clock=schedule_clock,
        interval=poll_interval,
    )
    worker.schedules = schedules
    return Parts(table, children, driver, worker, starter, streams, schedules)
