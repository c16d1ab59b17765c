"""Durable conversations and per-agent turn queues, on mailboxes.

A **conversation** is one long-lived run, addressed by its id (the run id),
that executes :class:`~.loop.ConversationLoop`: it receives a turn from its
mailbox (``ctx.receive``, suspended in between, S7), calls the agent with the
message and the history so far, sends the reply back, and waits for the
next. The history is the ledger: a resumed conversation rebuilds it by
replay, and the caller never passes it back.

A **turn** is a small run of its own (:func:`~.turn.turn`, id
``<conversation>~turn-<id>``): it sends the user's message to the
conversation's mailbox and receives the reply. So a caller's ``await
conversation.send(message)`` is ``await`` of a run's outcome, which works
across processes and crashes (S10); turns sent while another is answered
queue up in the conversation's mailbox and are taken in order.

**Follow-ups injected** (``followups="inject"``): turns sent while one is
answered are taken by the agent before its next model call, as recorded
receives of its step (S1); see :mod:`.followups`.

**Who executes the conversation.** By default the process that sends
executes the conversation's run (and the turn's), as a script or an
in-memory runner does. A conversation opened with ``queue=``
(``Conversation(runner, agent, id, queue="default")``) only creates the runs:
the conversation's run and each turn's are put on that queue for a worker
serving :func:`conversation_policies` of the agent, and ``send`` awaits the
turn's outcome from the store: a client, such as the HTTP API without
``--execute``.

Bounded for ever: after ``max_turns`` turns, or once the history passes
``max_bytes``, the conversation continues as new
(``engine.mailbox.continue_as_new``): the history the agent's context policy
(``llm.Agent(context=Window(...) or Compaction(...))``) keeps, cut to
``carry_last`` messages, becomes the input of a fresh generation under the
same run id, and the old generation's steps move to an archive run
``<conversation>~<n>``, prunable like any finished run. The unread mailbox
stays with the run, so messages sent during the handover wait for the new
generation.

A **turn queue** (pygents' ``Agent.put/run/stream``) is the same machinery
without history: ``Conversation(runner, agent, id, history=False,
parallel=N)`` takes up to ``parallel`` queued turns at once, answers them
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
from ..runner import RunHandle
from ..runner.handle import Runs
from ..runner.inputs import check_same_run, run_inputs
from ..stores.base import Store
from .loop import ConversationLoop
from .turn import turn

__all__ = [
    "Conversation",
    "ConversationHost",
    "conversation_policies",
    "conversation_policy",
]


_LOOPS: dict[tuple[int, tuple[Any, ...]], ConversationLoop] = {}


def conversation_policy(agent: Any, **options: Any) -> ConversationLoop:
    """The loop a conversation with ``agent`` runs (one per agent and
    options): give it to a worker, ``Runner(url, policies=[conversation_policy(agent),
    turn])``, so it resumes conversations it did not start."""
    key = (id(as_policy(agent)), tuple(sorted(options.items())))
    loop = _LOOPS.get(key)
    if loop is None or loop.pol is not as_policy(agent):
        loop = _LOOPS[key] = ConversationLoop(agent, **options)
    return loop


def conversation_policies(agent: Any, **options: Any) -> list[Any]:
    """What a worker needs to execute conversations with ``agent`` it did not
    start: their loop (with these options: ``followups`` and the
    continue-as-new limits are the executing loop's) and :func:`turn`.
    ``Runner(url, policies=[*conversation_policies(agent)])``, or in ``--app``."""
    return [conversation_policy(agent, **options), turn]


class ConversationHost(Runs, Protocol):
    """What a conversation needs of its :class:`~stalwart.Runner`."""

    store: Store

    async def open(self) -> None: ...
    def register(self, target: Any) -> Policy[Any, Any]: ...
    def version_of(self, pol: Policy[Any, Any]) -> str: ...
    async def execute_here(
        self,
        rec: RunRecord,
        pol: Policy[Any, Any],
        call: tuple[tuple[Any, ...], dict[str, Any]] | None,
    ) -> None: ...
    async def start_as(
        self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run_id: str
    ) -> None: ...
    def listen(self, run_id: str, queue: asyncio.Queue[Any]) -> None: ...


class Conversation:
    """A conversation with an agent (or a turn queue), addressed by
    ``conversation_id``, over a runner.

    ``options`` are the loop's (:class:`~.loop.ConversationLoop`):
    ``max_turns``, ``max_bytes``, ``carry_last`` (when and how much to carry
    into a fresh generation), ``followups`` (``"queue"``, or ``"inject"`` at
    the agent's next model call); ``history=False, parallel=N`` make it a turn
    queue. ``queue``: this process only enqueues the conversation's run and
    its turns there, for a worker serving ``conversation_policies(agent)``;
    None executes them here.

    ``await conversation.send(message)`` returns the agent's reply;
    ``conversation.put(message)`` returns the turn's :class:`RunHandle` at
    once; ``conversation.stream(message)`` yields the conversation's events
    for this turn when it executes in this process, then the turn's
    ``RunFinished``.
    """

    def __init__(
        self,
        runner: ConversationHost,
        agent: Any,
        conversation_id: str,
        *,
        queue: str | None = None,
        **options: Any,
    ) -> None:
        self.runner = runner
        self.loop = conversation_policy(agent, **options)
        self.conversation_id = check_run_id(conversation_id)
        self.queue = queue

    async def open(self) -> None:
        """Start the conversation's run unless it exists; execute it here if
        nobody holds it, or, with a ``queue``, leave it on that queue for a worker."""
        runner = self.runner
        await runner.open()
        pol = runner.register(self.loop)
        runner.register(turn)
        memory = runner.store.ephemeral
        cid = self.conversation_id
        if memory and self.queue is not None:
            raise StoreError(
                f"conversation {cid!r}: a conversation on a queue needs a durable store "
                "(in memory, nothing but this process can execute it: drop queue=)"
            )
        inputs = run_inputs(pol, cid, (), {})
        queue = self.queue or "default"
        rec = RunRecord(cid, pol.name, inputs, code_version=runner.version_of(pol), queue=queue)
        stored, _ = await runner.store.create_run(rec)
        if stored.policy != pol.name:
            raise InputMismatchError(
                f"conversation {cid!r} exists as a run of {stored.policy!r}, not of {pol.name!r}"
            )
        if stored.status in TERMINAL:
            raise InputMismatchError(f"conversation {cid!r} has ended ({stored.status})")
        if self.queue is None:
            await runner.execute_here(stored, pol, ((), {}) if memory else None)

    async def put(self, message: Any, *, message_id: str | None = None) -> RunHandle:
        """Queue ``message`` as a turn and return its handle at once.

        ``message_id`` makes the put idempotent: the same id is the same turn
        (a caller retrying after a crash gets the same reply, not a second one).
        """
        await self.open()
        mid = check_run_id(message_id) if message_id is not None else uuid.uuid4().hex
        turn_id = f"{self.conversation_id}{CHILD_MARK}turn-{mid}"
        # "thread" is the turn's parameter, as every stored turn's inputs name it.
        call = {"thread": self.conversation_id, "message": message}
        if self.queue is not None:  # a client: a worker executes the turn too
            await self._enqueue_turn(turn_id, call, self.queue)
        else:
            await self.runner.start_as(turn, (), call, turn_id)
        return RunHandle(self.runner, turn_id)

    async def _enqueue_turn(self, turn_id: str, call: dict[str, Any], queue: str) -> None:
        """Create the turn's run on ``queue`` (``Runner.enqueue`` takes user
        ids only; a turn's id carries ``~``): the same id again is the same
        turn, or, with another message, refused naming it."""
        runner = self.runner
        pol = runner.register(turn)
        inputs = run_inputs(pol, turn_id, (), call)
        rec = RunRecord(turn_id, pol.name, inputs, code_version=runner.version_of(pol), queue=queue)
        stored, created = await runner.store.create_run(rec)
        if not created:
            check_same_run(pol, stored, rec, stored.policy == pol.name)

    async def send(self, message: Any, *, message_id: str | None = None) -> Any:
        """Send ``message`` and return the agent's reply (its error raised as
        :class:`~stalwart.TurnFailed`)."""
        handle = await self.put(message, message_id=message_id)
        return await handle.result()

    async def stream(self, message: Any, *, message_id: str | None = None) -> AsyncIterator[Event]:
        """The conversation's events while it answers this turn (live only
        when the conversation executes in this process), ending with the
        turn's RunFinished."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.runner.listen(self.conversation_id, queue)
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
            self.runner.unlisten(self.conversation_id, queue)


async def _settled(handle: RunHandle) -> RunFinished:
    try:
        value = await handle.result()
    except Exception as exc:
        return RunFinished(handle.run_id, "failed", None, f"{type(exc).__name__}: {exc}")
    return RunFinished(handle.run_id, "succeeded", value, None)
