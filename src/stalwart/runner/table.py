"""The runs of one runner (which it executes now, which are its own, who
listens), and the settings its parts share.

One object holds this state so that the parts of a runner (the driver that
executes a run, the worker loop that claims runs, the child-run host, the
streams) share it through one documented surface instead of reaching into
each other. Everything here is bookkeeping in this process; what the store
says is the truth about a run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import StoreUnavailable
from ..core.events import Hook, RunFinished
from ..core.ledger import TERMINAL
from ..core.policy import Policy
from .handle import Live
from .leases import Leases
from .versions import code_version

__all__ = ["RunTable", "Settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """What a :class:`~stalwart.Runner` was made with that its parts read
    (see its docstring): given to each part at construction, never changed."""

    owner: str
    hooks: tuple[Hook, ...]
    lease: float
    poll_interval: float
    inline_sleep: float
    max_parallel: int | None
    queues: Sequence[str] | None
    concurrency: int | None
    code_version: str | None

    def version_of(self, pol: Policy[Any, Any]) -> str:
        """The code version runs of ``pol`` are recorded with."""
        return self.code_version if self.code_version is not None else code_version(pol)


class RunTable:
    """State shared by a runner's parts. Fields are public on purpose: each
    names who writes it.

    * ``live``: runs executing in this process (the driver adds and removes).
    * ``mine``: runs this runner started or spawned, which it resumes by
      itself when they wake, serving or not (the runner and the child host
      add; :meth:`finish` removes on a final outcome).
    * ``listeners``: event queues per run id (streams and ``start()``).
    * ``watchers``: per run id, an event set when the run settles here, so an
      awaiting caller looks at the store again at once.
    * ``claiming``: ids with a claim in flight, which neither ``start()`` nor
      the worker loop may claim a second time meanwhile.
    * ``kept``: outcomes of runs in an ephemeral (memory) store, as Python
      values, since such a run's result need not be JSON.
    * ``calls``: the arguments of memory runs whose inputs are not JSON, to
      tell a second start of the same id with other inputs (compared ``==``).
    * ``retry_after``: run id -> (not before, last delay) for runs dropped on
      ``StoreUnavailable`` (the worker loop backs off from them, S14).
    * ``watching``: the task taking the store's wake-ups from other
      processes, once the worker loop started it (see :meth:`Worker._watch`).
    * ``store_down``: the error of the worker loop's last pass while the
      store does not answer (the loop sets and clears it, see
      :meth:`store_unavailable`); None while it answers.
    * ``leases``: the lease counts (:mod:`.leases`): the driver adds the
      taken and the lost, the worker loop the renewed.
    """

    def __init__(self, poll_interval: float) -> None:
        self.poll_interval = poll_interval
        self.live: dict[str, Live] = {}
        self.mine: set[str] = set()
        self.listeners: dict[str, list[asyncio.Queue[Any]]] = {}
        self.watchers: dict[str, asyncio.Event] = {}
        self.claiming: set[str] = set()
        self.kept: dict[str, tuple[str, Any]] = {}
        self.calls: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.retry_after: dict[str, tuple[float, float]] = {}
        self.poke: asyncio.Event | None = None  # the worker loop's wake-up, when it runs
        self.watching: asyncio.Task[None] | None = None
        self.store_down: StoreUnavailable | None = None
        self.leases = Leases()
        #: The bug that ended the worker loop (see :meth:`loop_failed`).
        self.failed: BaseException | None = None
        self._claim_lock: asyncio.Lock | None = None

    def claims(self) -> asyncio.Lock:
        """Held around every claim, so ``start()``, ``recover()`` and the
        worker loop never claim the same run twice in one process."""
        if self._claim_lock is None:
            self._claim_lock = asyncio.Lock()
        return self._claim_lock

    def wake_worker(self) -> None:
        """Make the worker loop look at the store now, not at its next poll."""
        if self.poke is not None:
            self.poke.set()

    def store_unavailable(self, exc: StoreUnavailable | None) -> None:
        """The worker loop's word on the store: down with ``exc`` (its own
        retries spent), or answering again (None). Going down wakes every
        awaiting caller, so that one awaiting a run busy in its own code reads
        the store, and hears that it is gone, instead of waiting on the run."""
        was, self.store_down = self.store_down, exc
        if exc is not None and was is None:
            for watcher in self.watchers.values():
                watcher.set()

    def loop_failed(self, exc: BaseException) -> None:
        """The worker loop ended on a bug (``exc``): nothing here claims,
        wakes or heartbeats runs any more. Every awaiting caller is woken to
        hear it, rather than wait for a wake-up that will never come."""
        self.failed = exc
        for watcher in self.watchers.values():
            watcher.set()

    def listen(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        self.listeners.setdefault(run_id, []).append(queue)
        live = self.live.get(run_id)
        if live is not None and queue not in live.engine.listeners:
            live.engine.listen(queue)

    def unlisten(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        listeners = self.listeners.get(run_id)
        if listeners is not None and queue in listeners:
            listeners.remove(queue)
            if not listeners:
                del self.listeners[run_id]
        live = self.live.get(run_id)
        if live is not None:
            live.engine.unlisten(queue)

    def finish(self, live: Live, outcome: tuple[str, Any]) -> None:
        """The run stopped executing here: settle its waiters and listeners."""
        run_id = live.engine.run_id
        if self.live.get(run_id) is live:
            del self.live[run_id]
        status, value = outcome
        if status == "lost" and isinstance(value, StoreUnavailable):
            # Not straight back: a store that refuses this run's writes now
            # would be asked again a hundred times a second (S14).
            last = self.retry_after.get(run_id, (0.0, self.poll_interval / 2))[1]
            delay = min(30.0, 2 * last)
            self.retry_after[run_id] = (time.monotonic() + delay, delay)
        else:
            self.retry_after.pop(run_id, None)
        for q in list(live.engine.listeners):
            # It publishes nothing more; holding the queues would keep every
            # event (and the step values in them) alive with the execution.
            live.engine.unlisten(q)
        if not live.done.done():
            live.done.set_result(outcome)
        self.wake_worker()  # room for another run: claim now, not at the next poll
        if status in TERMINAL:
            self.mine.discard(run_id)
            err = None if status == "succeeded" else f"{type(value).__name__}: {value}"
            event = RunFinished(run_id, status, value if status == "succeeded" else None, err)
            for q in self.listeners.pop(run_id, []):
                q.put_nowait(event)
        watcher = self.watchers.pop(run_id, None)
        if watcher is not None:
            watcher.set()
