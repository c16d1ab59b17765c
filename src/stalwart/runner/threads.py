"""Durable conversations (threads) and per-agent turn queues, on mailboxes.

A **thread** is one long-lived run, addressed by its thread id (the run id),
that executes :class:`ThreadLoop`: it receives a turn from its mailbox
(``ctx.receive``, suspended in between, S7), calls the agent with the
message and the history so far, sends the reply back, and waits for the
next. The history is the ledger: a resumed thread rebuilds it by replay,
and the caller never passes it back.

A **turn** is a small run of its own (:func:`turn`, id ``<thread>~turn-<id>``):
it sends the user's message to the thread's mailbox and receives the reply.
So a caller's ``await thread.send(message)`` is ``await`` of a run's outcome,
which works across processes and crashes (S10); turns sent while another is
answered queue up in the thread's mailbox and are taken in order.

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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from ..core import codec
from ..core.context import Context
from ..core.declared import register_type
from ..core.errors import InputMismatchError, StalwartError
from ..core.events import Emitted, Event, RunFinished
from ..core.ledger import CHILD_MARK, TERMINAL, RunRecord, check_run_id
from ..core.message import Message
from ..core.policy import Policy, as_policy, policy
from ..stores.base import Store
from .handle import RunHandle, Runs
from .identity import run_inputs
from .table import RunTable

__all__ = ["REPLY", "TURN", "Thread", "ThreadLoop", "TurnFailed", "thread_policy", "turn"]

#: The kinds of the messages a turn and its thread exchange.
TURN = "stalwart.turn"
REPLY = "stalwart.reply"


class TurnFailed(StalwartError):
    """The agent failed on this turn (its error, as text); the thread goes on."""


register_type(TurnFailed)


@policy(name="stalwart.turn")
async def turn(ctx: Context, thread: str, message: Any) -> Any:
    """One turn of a thread: send ``message`` to the thread, await its reply.

    Each is a recorded step, so a turn killed at any point resumes where it
    was: it never sends twice and never misses the reply.
    """
    await ctx.send(thread, message, kind=TURN)
    got = await ctx.receive(sender=thread, kind=REPLY)
    out = got.payload
    if isinstance(out, dict) and isinstance(out.get("error"), str):
        raise TurnFailed(f"thread {thread!r}: {out['error']}")
    return out.get("reply") if isinstance(out, dict) else out


def _text(value: Any) -> str:
    if isinstance(value, Message):
        return value.text
    if isinstance(value, str):
        return value
    return codec.dumps(value, "a reply")


def _size(history: list[Message]) -> int:
    return len(codec.dumps(history, "a thread's history"))


class ThreadLoop:
    """The policy a thread's run executes (see the module's docstring).

    ``agent`` is any policy taking ``question`` (the user's message) and,
    with ``history``, ``history`` (the earlier messages): ``llm.Agent`` is one.
    """

    def __init__(
        self,
        agent: Any,
        *,
        history: bool = True,
        max_turns: int = 100,
        max_bytes: int = 256 * 1024,
        carry_last: int = 20,
        parallel: int = 1,
    ) -> None:
        if max_turns < 1 or max_bytes < 1 or carry_last < 1:
            raise ValueError("max_turns, max_bytes and carry_last must be at least 1")
        if parallel < 1 or (history and parallel > 1):
            raise ValueError("parallel must be at least 1, and 1 for a thread with history")
        self.agent = agent
        self.pol = as_policy(agent)
        self.history = history
        self.max_turns = max_turns
        self.max_bytes = max_bytes
        self.carry_last = carry_last
        self.parallel = parallel
        kind = "thread" if history else "turns"
        self.name = f"stalwart.{kind}:{self.pol.name}"
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self, name=self.name, description=f"The {kind} of {self.pol.name}."
        )

    async def __call__(
        self, ctx: Context, carried: list[Message] | None = None, generation: int = 1
    ) -> None:
        """Answer turns for ever (a thread ends when it is cancelled)."""
        engine = ctx.engine
        durable = engine.durable
        history = list(carried or [])
        # Keys scoped by generation: child runs a tool spawns keep distinct ids.
        scope = engine.context(f"g{generation}") if durable else ctx
        turns = 0
        while True:
            batch = [await scope.receive(kind=TURN)]
            while len(batch) < self.parallel:  # take what is queued, without waiting
                try:
                    batch.append(await scope.receive(kind=TURN, timeout=0))
                except TimeoutError:
                    break
            if len(batch) == 1:
                outs = [await self._answer(scope, batch[0].payload, history)]
            else:
                outs = list(
                    await asyncio.gather(*(self._answer(scope, m.payload, None) for m in batch))
                )
            for mail, out in zip(batch, outs, strict=True):
                if mail.sender is not None:
                    try:
                        await scope.send(mail.sender, out, kind=REPLY)
                    except LookupError:
                        pass  # the caller's turn is gone (pruned): nobody to tell
                    except StalwartError:
                        pass  # its turn finished (cancelled): nobody waits
                if self.history and "reply" in out:
                    history += [
                        Message.user(_text(mail.payload)),
                        Message.assistant(_text(out["reply"])),
                    ]
            turns += len(batch)
            if turns >= self.max_turns or (self.history and _size(history) > self.max_bytes):
                history = await self._carry(scope, history) if self.history else []
                turns = 0
                if durable:
                    await engine.continue_as_new(
                        (), {"carried": history or None, "generation": generation + 1}
                    )

    async def _answer(
        self, scope: Context, message: Any, history: list[Message] | None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"question": _text(message)}
        if history is not None and self.history:
            kwargs["history"] = list(history)
        scope.emit({"turn": "started"})
        try:
            return {"reply": await scope.call(self.agent, **kwargs)}
        except Exception as exc:  # the agent's recorded failure: this turn's, not the thread's
            return {"error": f"{type(exc).__name__}: {exc}"}

    async def _carry(self, scope: Context, history: list[Message]) -> list[Message]:
        """What the next generation starts from: the agent's context policy
        (``llm.Agent.context``: a window, or a summary by the model) decides,
        and at most ``carry_last`` messages are kept, so a handover is bounded."""
        shape: Callable[..., Awaitable[list[Message]]] | None = getattr(self.agent, "context", None)
        if callable(shape):
            default = getattr(self.agent, "model", None)

            async def call(observations: list[Message], *, model: Any = None) -> Any:
                target: Any = model if model is not None else default
                raw = await scope.call(target, observations=observations)
                return [raw] if isinstance(raw, Message) else raw

            history = list(await shape(list(history), call))
        return history[-self.carry_last :]

    def __repr__(self) -> str:
        return f"<ThreadLoop {self.name}>"


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

    def __init__(self, runner: ThreadHost, loop: ThreadLoop, thread_id: str) -> None:
        self.runner = runner
        self.loop = loop
        self.thread_id = check_run_id(thread_id)

    async def open(self) -> None:
        """Start the thread's run unless it exists; execute it here if nobody holds it."""
        runner = self.runner
        await runner.open()
        pol = runner.register(self.loop)
        runner.register(turn)
        memory = runner.store.ephemeral
        inputs = run_inputs(pol, self.thread_id, (), {})
        rec = RunRecord(self.thread_id, pol.name, inputs, code_version=runner._version(pol))
        stored, _ = await runner.store.create_run(rec)
        if stored.policy != pol.name:
            raise InputMismatchError(
                f"thread {self.thread_id!r} exists as a run of {stored.policy!r}, "
                f"not of {pol.name!r}"
            )
        if stored.status in TERMINAL:
            raise InputMismatchError(f"thread {self.thread_id!r} has ended ({stored.status})")
        await runner._claim_thread(stored, pol, ((), {}) if memory else None)

    async def put(self, message: Any, *, message_id: str | None = None) -> RunHandle:
        """Queue ``message`` as a turn and return its handle at once.

        ``message_id`` makes the put idempotent: the same id is the same turn
        (a caller retrying after a crash gets the same reply, not a second one).
        """
        await self.open()
        mid = check_run_id(message_id) if message_id is not None else uuid.uuid4().hex
        turn_id = f"{self.thread_id}{CHILD_MARK}turn-{mid}"
        await self.runner._start(turn, (), {"thread": self.thread_id, "message": message}, turn_id)
        return RunHandle(self.runner, turn_id)

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
