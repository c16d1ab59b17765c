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

**Follow-ups injected** (``followups="inject"``): while a turn is answered,
the agent's loop (``llm.Agent``) asks the thread before each model call for
the turns waiting in its mailbox (:func:`taking_followups`, a hook passed in
a context variable, so the llm layer's contract is unchanged for everyone
else); each is taken by a recorded ``ctx.receive`` of the agent's step, so a
replay adds the same messages at the same point, and the key of every later
step is the same on every execution (S1). A folded turn gets the reply of the
turn it was answered with (the reply message names that turn under
``"with"``).

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
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, Literal, Protocol

from ..core import codec
from ..core.context import Context
from ..core.declared import register_type
from ..core.errors import InputMismatchError, StalwartError, StoreError
from ..core.events import Emitted, Event, RunFinished
from ..core.ledger import CHILD_MARK, TERMINAL, RunRecord, check_run_id
from ..core.mail import Mail
from ..core.message import Message
from ..core.policy import Policy, as_policy, policy
from ..stores.base import Store
from .handle import RunHandle, Runs
from .identity import check_same_run, run_inputs
from .table import RunTable

__all__ = [
    "REPLY",
    "TURN",
    "Followups",
    "Thread",
    "ThreadLoop",
    "TurnFailed",
    "taking_followups",
    "thread_policies",
    "thread_policy",
    "turn",
]

#: The kinds of the messages a turn and its thread exchange.
TURN = "stalwart.turn"
REPLY = "stalwart.reply"


class TurnFailed(StalwartError):
    """The agent failed on this turn (its error, as text); the thread goes on."""


register_type(TurnFailed)

#: What an agent's loop calls before each model call, with its own context,
#: to get the follow-ups to add to its conversation (``followups="inject"``).
Followups = Callable[[Context], Awaitable[list[Message]]]

_FOLLOWUPS: ContextVar[Followups | None] = ContextVar("stalwart_thread_followups", default=None)


@contextlib.contextmanager
def taking_followups() -> Iterator[Followups | None]:
    """The follow-up hook a thread set around this agent call (None if none),
    cleared for what runs inside it: a sub-agent or a tool never takes the
    thread's turns, only the agent the thread called. ``llm.Agent`` calls the
    hook before each model call; any agent loop may do the same."""
    hook = _FOLLOWUPS.get()
    token = _FOLLOWUPS.set(None)
    try:
        yield hook
    finally:
        _FOLLOWUPS.reset(token)


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
        followups: Literal["queue", "inject"] = "queue",
    ) -> None:
        if max_turns < 1 or max_bytes < 1 or carry_last < 1:
            raise ValueError("max_turns, max_bytes and carry_last must be at least 1")
        if parallel < 1 or (history and parallel > 1):
            raise ValueError("parallel must be at least 1, and 1 for a thread with history")
        if followups not in ("queue", "inject"):
            raise ValueError(f"followups must be 'queue' or 'inject', not {followups!r}")
        if followups == "inject" and not history:
            raise ValueError("followups='inject' needs a conversation: a turn queue has none")
        self.followups = followups
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
            answered: list[tuple[Mail, dict[str, Any]]]
            if len(batch) == 1:
                first = batch[0]
                folded: list[Mail] = []
                out = await self._answer(
                    scope, first.payload, history, folded if self.followups == "inject" else None
                )
                # A follow-up folded into this turn gets its reply, naming the turn.
                answered = [(first, out)] + [(m, {**out, "with": first.sender}) for m in folded]
                if self.history and "reply" in out:
                    history += [Message.user(_text(m.payload)) for m in (first, *folded)]
                    history.append(Message.assistant(_text(out["reply"])))
            else:
                outs = await asyncio.gather(*(self._answer(scope, m.payload, None) for m in batch))
                answered = list(zip(batch, outs, strict=True))
            for mail, out in answered:
                if mail.sender is not None:
                    try:
                        await scope.send(mail.sender, out, kind=REPLY)
                    except LookupError:
                        pass  # the caller's turn is gone (pruned): nobody to tell
                    except StalwartError:
                        pass  # its turn finished (cancelled): nobody waits
            turns += len(answered)
            if turns >= self.max_turns or (self.history and _size(history) > self.max_bytes):
                history = await self._carry(scope, history) if self.history else []
                turns = 0
                if durable:
                    await engine.continue_as_new(
                        (), {"carried": history or None, "generation": generation + 1}
                    )

    async def _answer(
        self,
        scope: Context,
        message: Any,
        history: list[Message] | None,
        folded: list[Mail] | None = None,
    ) -> dict[str, Any]:
        """The agent's reply to ``message`` (or its error). With ``folded``,
        the agent may take follow-ups before its model calls: they are
        appended to ``folded``, in the order taken."""
        kwargs: dict[str, Any] = {"question": _text(message)}
        if history is not None and self.history:
            kwargs["history"] = list(history)
        scope.emit({"turn": "started"})
        if folded is None:
            try:
                return {"reply": await scope.call(self.agent, **kwargs)}
            except Exception as exc:  # the agent's recorded failure: this turn's, not the thread's
                return {"error": f"{type(exc).__name__}: {exc}"}
        # The agent's step key (the one ``call`` takes next): its direct
        # children hold the follow-ups it took.
        key = scope._peek_key()
        asked: list[bool] = []
        token = _FOLLOWUPS.set(_followups(folded, asked))
        try:
            out = {"reply": await scope.call(self.agent, **kwargs)}
        except Exception as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            _FOLLOWUPS.reset(token)
        if not asked and scope.engine.durable:
            # The agent's step was replayed whole (its body did not run, nor
            # the hook): the follow-ups it took are its recorded receives.
            folded += _taken(scope.engine.replayed_values("receive"), key)
        return out

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


def _followups(folded: list[Mail], asked: list[bool]) -> Followups:
    """The hook of one turn: take every turn waiting now, without waiting.

    Each take is a ``ctx.receive`` of the agent's step (a recorded step under
    the agent's next keys), and so is the empty one that ends it (a recorded
    timeout): a replay takes the same messages at the same point and finds
    the same keys after them (S1)."""

    async def take(ctx: Context) -> list[Message]:
        asked.append(True)
        got: list[Message] = []
        while True:
            try:
                mail: Mail = await ctx.receive(kind=TURN, timeout=0)
            except TimeoutError:
                return got
            folded.append(mail)
            got.append(Message.user(_text(mail.payload)))

    return take


def _taken(received: dict[str, Any], key: str) -> list[Mail]:
    """The turns the agent's step ``key`` took, in order: the replayed
    receives among its direct children (``key.N``) that hold a turn."""
    found: list[tuple[int, Mail]] = []
    for k, env in received.items():
        head, _, n = k.rpartition(".")
        if head != key or not n.isdigit() or not isinstance(env, dict):
            continue
        if env.get("kind") != TURN or not isinstance(env.get("id"), str):
            continue
        sender, sent_at = env.get("from"), env.get("sent_at")
        mail = Mail(
            payload=env.get("body"),
            sender=sender if isinstance(sender, str) else None,
            kind=TURN,
            sent_at=float(sent_at) if isinstance(sent_at, int | float) else 0.0,
            id=env["id"],
        )
        found.append((int(n), mail))
    return [m for _, m in sorted(found, key=lambda item: item[0])]


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
