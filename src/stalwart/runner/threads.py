"""Durable conversations (threads) and per-agent turn queues, on mailboxes.

A **thread** is one long-lived run, addressed by its thread id (the run id),
that executes :class:`~.thread_loop.ThreadLoop`: it receives a turn from its mailbox
(``ctx.receive``, suspended in between, S7), calls the agent with the
message and the history so far, sends the reply back, and waits for the
next. The history is the ledger: a resumed thread rebuilds it by replay,
and the caller never passes it back.

A **turn** is a small run of its own (:func:`~.turn.turn`, id ``<thread>~turn-<id>``):
it sends the user's message to the thread's mailbox and receives the reply.
So a caller's ``await thread.send(message)`` is ``await`` of a run's outcome,
which works across processes and crashes (S10); turns sent while another is
answered queue up in the thread's mailbox and are taken in order.

**Follow-ups injected** (``followups="inject"``): turns sent while one is
answered are taken by the agent before its next model call, as recorded
receives of its step (S1); see :mod:`.followups`.

**Who executes the thread.** By default the process that sends executes the
thread's run (and the turn's), as a script or an in-memory runner does. A
thread opened with ``queue=`` (``runner.thread(agent, id, queue="default")``)
only creates the runs: the thread's run and each turn's are put on that queue
for a worker serving :func:`thread_policies` of the agent, and ``send``
awaits the turn's outcome from the store: a client, such as the HTTP API
without ``--execute``.

Bounded for ever: after ``max_turns`` turns, or once the history passes
``max_bytes``, the thread continues as new (``engine.continue_as_new``): the
history the agent's context policy (``llm.Agent(context=Window(...) or
Compaction(...))``) keeps, cut to ``carry_last`` messages, becomes the input
of a fresh generation under the same run id, and the old generation's steps
move to an archive run ``<thread>~<n>``, prunable like any finished run. The
unread mailbox stays with the run, so messages sent during the handover wait
for the new generation.

A **turn queue** (pygents' ``Agent.put/run/stream``) is the same machinery
without history: :meth:`stalwart.Runner.turns` gives a :class:`Thread` whose
loop takes up to ``parallel`` queued turns at once, answers them
concurrently, and replies to each caller.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any, Protocol

from ..core.errors import InputMismatchError, StoreError
from ..core.events import Emitted, Event, RunFinished
from ..core.ledger import CHILD_MARK, TERMINAL, RunRecord, check_run_id
from ..core.policy import Policy, as_policy
from ..stores.base import Store
from .followups import Followups, taking_followups
from .handle import RunHandle, Runs
from .identity import check_same_run, run_inputs
from .table import RunTable
from .thread_loop import ThreadLoop
from .turn import REPLY, TURN, turn

# Followups, taking_followups, ThreadLoop, REPLY, TURN and turn
# live in .followups, .thread_loop and .turn; they stay importable from here,
# where callers (llm.Agent, workers' --app files) have always found them.
__all__ = [
    "REPLY",
    "TURN",
    "Followups",
    "Thread",
    "ThreadLoop",
    "taking_followups",
    "thread_policies",
    "thread_policy",
    "turn",
]


_LOOPS: dict[tuple[int, tuple[Any, ...]], ThreadLoop] = {}


def thread_policy(agent: Any, **options: Any) -> ThreadLoop:
    """The loop a thread of ``agent`` runs (one per agent and options): give
    it to a worker, ``Runner(url, policies=[thread_policy(agent), turn])``, so
    it resumes threads it did not start."""
    key = (id(as_policy(agent)), tuple(sorted(options.items())))
    loop = _LOOPS.get(key)
    if loop is None or loop.pol is not as_policy(agent):
        loop = _LOOPS[key] = ThreadLoop(agent, **options)
    return loop


def thread_policies(agent: Any, **options: Any) -> list[Any]:
    """What a worker needs to execute threads of ``agent`` it did not start:
    their loop (with these options: ``followups`` and the continue-as-new
    limits are the executing loop's) and :func:`turn`.
    ``Runner(url, policies=[*thread_policies(agent)])``, or in ``--app``."""
    return [thread_policy(agent, **options), turn]


class ThreadHost(Runs, Protocol):
    """What a thread needs of its :class:`~stalwart.Runner` (named here
    because ``runner.py`` imports this module, not the other way round)."""

    store: Store
    _table: RunTable

    async def open(self) -> None: ...
    def register(self, target: Any) -> Policy[Any, Any]: ...
    def _version(self, pol: Policy[Any, Any]) -> str: ...
    async def _claim_thread(
        self,
        rec: RunRecord,
        pol: Policy[Any, Any],
        call: tuple[tuple[Any, ...], dict[str, Any]] | None,
    ) -> None: ...
    async def _start(
        self,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str,
        settle: bool = True,
    ) -> None: ...


class Thread:
    """A conversation with an agent (or a turn queue), addressed by ``thread_id``.

    ``await thread.send(message)`` returns the agent's reply;
    ``thread.put(message)`` returns the turn's :class:`RunHandle` at once;
    ``thread.stream(message)`` yields the thread's events for this turn when
    it executes in this process, then the turn's ``RunFinished``.
    """

    def __init__(
        self, runner: ThreadHost, loop: ThreadLoop, thread_id: str, queue: str | None = None
    ) -> None:
        self.runner = runner
        self.loop = loop
        self.thread_id = check_run_id(thread_id)
        self.queue = queue

    async def open(self) -> None:
        """Start the thread's run unless it exists; execute it here if nobody
        holds it, or, with a ``queue``, leave it on that queue for a worker."""
        runner = self.runner
        await runner.open()
        pol = runner.register(self.loop)
        runner.register(turn)
        memory = runner.store.ephemeral
        if memory and self.queue is not None:
            raise StoreError(
                f"thread {self.thread_id!r}: a thread on a queue needs a durable store "
                "(in memory, nothing but this process can execute it: drop queue=)"
            )
        inputs = run_inputs(pol, self.thread_id, (), {})
        rec = RunRecord(
            self.thread_id,
            pol.name,
            inputs,
            code_version=runner._version(pol),
            queue=self.queue or "default",
        )
        stored, _ = await runner.store.create_run(rec)
        if stored.policy != pol.name:
            raise InputMismatchError(
                f"thread {self.thread_id!r} exists as a run of {stored.policy!r}, "
                f"not of {pol.name!r}"
            )
        if stored.status in TERMINAL:
            raise InputMismatchError(f"thread {self.thread_id!r} has ended ({stored.status})")
        if self.queue is None:
            await runner._claim_thread(stored, pol, ((), {}) if memory else None)

    async def put(self, message: Any, *, message_id: str | None = None) -> RunHandle:
        """Queue ``message`` as a turn and return its handle at once.

        ``message_id`` makes the put idempotent: the same id is the same turn
        (a caller retrying after a crash gets the same reply, not a second one).
        """
        await self.open()
        mid = check_run_id(message_id) if message_id is not None else uuid.uuid4().hex
        turn_id = f"{self.thread_id}{CHILD_MARK}turn-{mid}"
        call = {"thread": self.thread_id, "message": message}
        if self.queue is not None:  # a client: a worker executes the turn too
            await self._enqueue_turn(turn_id, call, self.queue)
        else:
            await self.runner._start(turn, (), call, turn_id)
        return RunHandle(self.runner, turn_id)

    async def _enqueue_turn(self, turn_id: str, call: dict[str, Any], queue: str) -> None:
        """Create the turn's run on ``queue`` (``Runner.enqueue`` takes user
        ids only; a turn's id carries ``~``): the same id again is the same
        turn, or, with another message, refused naming it."""
        runner = self.runner
        pol = runner.register(turn)
        inputs = run_inputs(pol, turn_id, (), call)
        rec = RunRecord(turn_id, pol.name, inputs, code_version=runner._version(pol), queue=queue)
        stored, created = await runner.store.create_run(rec)
        if not created:
            check_same_run(pol, stored, rec, stored.policy == pol.name)

    async def send(self, message: Any, *, message_id: str | None = None) -> Any:
        """Send ``message`` and return the agent's reply (its error raised as
        :class:`TurnFailed`)."""
        handle = await self.put(message, message_id=message_id)
        return await handle.result()

    async def stream(self, message: Any, *, message_id: str | None = None) -> AsyncIterator[Event]:
        """The thread's events while it answers this turn (live only when the
        thread executes in this process), ending with the turn's RunFinished."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.runner._table.listen(self.thread_id, queue)
        try:
            handle = await self.put(message, message_id=message_id)
            done = asyncio.ensure_future(_settled(handle))
            while True:
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, done}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    event = getter.result()
                    if not isinstance(event, Emitted | RunFinished):
                        yield event
                    continue
                getter.cancel()
                break
            yield done.result()
        finally:
            self.runner._table.unlisten(self.thread_id, queue)


async def _settled(handle: RunHandle) -> RunFinished:
    try:
        value = await handle.result()
    except Exception as exc:
        return RunFinished(handle.run_id, "failed", None, f"{type(exc).__name__}: {exc}")
    return RunFinished(handle.run_id, "succeeded", value, None)
