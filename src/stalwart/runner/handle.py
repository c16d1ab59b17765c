"""Handles on runs: what ``start()`` returns and what ``RunHandle(runner, id)`` finds."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.engine.engine import Engine
from ..core.events import Event, RunFinished
from ..core.ledger import RunRecord


class Runs(Protocol):
    """What a handle needs of its runner (a :class:`~stalwart.Runner`)."""

    @property
    def closed(self) -> bool: ...
    async def outcome(self, run_id: str) -> Any: ...
    async def get_run(self, run_id: str) -> RunRecord: ...
    async def cancel(self, run_id: str) -> None: ...
    def events(
        self, run_id: str, queue: asyncio.Queue[Any] | None = None
    ) -> AsyncIterator[Event]: ...
    def unlisten(self, run_id: str, queue: asyncio.Queue[Any]) -> None: ...


__all__ = ["EventBuffer", "Live", "RunHandle"]


@dataclass(eq=False)
class Live:
    """A run executing in this process."""

    engine: Engine
    task: asyncio.Task[None] | None = None
    done: asyncio.Future[tuple[str, Any]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    cancel_requested: bool = False
    lost: bool = False  # a heartbeat found another owner: stop, write nothing


class EventBuffer(asyncio.Queue[Any]):
    """The events of a run kept for its handle's first :meth:`RunHandle.events`.

    Bounded: past ``limit`` unread events, later ones are dropped (the run
    never blocks on a reader that may never come), except the last one,
    :class:`RunFinished`, so a late reader still sees how the run ended.
    """

    limit = 10_000

    def put_nowait(self, item: Any) -> None:
        if self.qsize() < self.limit or isinstance(item, RunFinished):
            super().put_nowait(item)


class RunHandle:
    """A run you started or found: await its result, stream it, cancel it."""

    def __init__(self, runner: Runs, run_id: str, queue: asyncio.Queue[Any] | None = None) -> None:
        self.runner = runner
        self.run_id = run_id
        #: Whether the call that returned this handle created the run (False:
        #: a run with this id existed, and this is it). Set by ``enqueue``.
        self.created = True
        # Events since start(), kept for the first events() call; let go of
        # (unsubscribed) when the handle is dropped without reading them.
        self._queue = queue
        self._unsubscribe = (
            None if queue is None else weakref.finalize(self, runner.unlisten, run_id, queue)
        )

    async def result(self, timeout: float | None = None) -> Any:
        """The run's result (or its error, raised), waiting as long as needed.

        A handle awaited for its result stops keeping the run's events for a
        later :meth:`events` call (they would hold every step's value).
        """
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = self._queue = None
        self._check_open()
        async with asyncio.timeout(timeout):
            return await self.runner.outcome(self.run_id)

    async def status(self) -> str:
        self._check_open()
        return (await self.runner.get_run(self.run_id)).status

    def _check_open(self) -> None:
        # Awaiting through a closed runner would quietly reopen its store, and
        # nothing would close it again (a leaked pool). Say so instead.
        if self.runner.closed:
            raise RuntimeError(
                f"the runner of run {self.run_id!r} is closed; await the run through an "
                f"open runner: RunHandle(runner, {self.run_id!r})"
            )

    async def cancel(self) -> None:
        await self.runner.cancel(self.run_id)

    def events(self) -> AsyncIterator[Event]:
        """Live events of the run, ending with :class:`RunFinished`.

        The first call on a handle from :meth:`Runner.start` begins at the
        run's start; later calls (and other handles) begin now.
        """
        queue, self._queue = self._queue, None
        if self._unsubscribe is not None:
            self._unsubscribe.detach()  # the stream owns the queue now
            self._unsubscribe = None
        return self.runner.events(self.run_id, queue)

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id}>"
