"""Context: how a running policy reaches the engine that executes its run.

A context belongs to one step. It hands out child step keys (S1) in the order
calls are made, synchronously, so that concurrent calls get the same keys on
every execution; and it gives the policy the engine's recorded services:
durable sleep, signals, and recorded time, ids and randomness.

Subclass it to bind policies as typed attributes::

    class App(sw.Context):
        search = web_search          # ``await ctx.search(query=...)``
"""

from __future__ import annotations

import random as _random
import re
import time
import uuid as _uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, Protocol, TypeVar, overload

from .errors import CorruptedRecord, StalwartError
from .expects import check_schema
from .ledger import CHILD_MARK, StoredStep
from .memory import Memory, MemoryLedger
from .recorded import recorded_outcome

if TYPE_CHECKING:
    from .engine.engine import Engine

__all__ = [
    "Child",
    "Context",
    "Journaling",
    "Mailboxes",
    "SupportsPolicy",
]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class SupportsPolicy(Protocol[P, R_co]):
    """Anything that can stand for a policy (a PocketFlow flow, an agent...)."""

    @property
    def __stalwart_policy__(self) -> Callable[P, Awaitable[R_co]]: ...


class Mailboxes(Protocol):
    """What a layer above the core reaches of a run's mailbox
    (:class:`~stalwart.core.engine.mailbox.Mailbox`): a conversation's turns
    are messages, and a long one continues as new."""

    async def receive(
        self,
        deadline_key: str,
        key: str,
        sender: str | None,
        kind: str | None,
        timeout: float | None,
    ) -> Any:
        """The oldest matching message (a ``Mail``), suspending while there is none."""
        ...

    async def continue_as_new(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NoReturn:
        """Start the run again from the top with these inputs and an empty ledger."""
        ...


class Journaling(Protocol):
    """The journaling API (``docs/journaling.md``): what a layer above the
    core (``stalwart.flow``, journeys, conversations) reaches of the engine
    that executes its run (:class:`~stalwart.core.engine.engine.Engine`) to
    run its own units of work durably inside the run, without its private
    state. ``ctx.engine`` gives it."""

    @property
    def run_id(self) -> str: ...

    @property
    def replay(self) -> Mapping[str, StoredStep]:
        """The records of the run's ledger when this execution began, by key."""
        ...

    @property
    def durable(self) -> bool:
        """Whether this run records its steps (a ledger), so units must be keyed."""
        ...

    @property
    def watched(self) -> bool:
        """Whether someone streams this run, so events are worth building."""
        ...

    @property
    def mailbox(self) -> Mailboxes: ...

    @property
    def memory_store(self) -> MemoryLedger | None:
        """Where the run's long-term memory is kept (the runner's store,
        durable or not), or None (a replay that touches no store)."""
        ...

    def context(self, key: str) -> Context:
        """A context of this run for the unit of work at ``key`` (S1 below it)."""
        ...

    def run_unit(
        self,
        key: str,
        name: str,
        work: Callable[[Context], Awaitable[Any]],
        args: dict[str, Any] | None = None,
        started: float | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """Replay the unit at ``key``, or run ``work`` once and record its outcome
        (``started``: when work done before the call began)."""
        ...

    def replayed_unit(self, key: str, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """A unit's recorded outcome read back without the event loop."""
        ...

    async def recorded(self, key: str, kind: str, make: Callable[[], Any]) -> Any:
        """The value recorded at ``key``, or ``make()`` recorded there."""
        ...

    def replayed_values(self, kind: str) -> dict[str, Any]:
        """The decoded values of every replayed record of ``kind``, by key."""
        ...

    def emit(self, key: str, value: Any, *, replayed: bool = False, marked: bool = False) -> None:
        """An event for whoever streams the run."""
        ...

    def halt(self, cause: StalwartError) -> BaseException:
        """Stop the run: a record that does not fit is the run's problem."""
        ...


# A retried step's attempt part in a key (``3@2``, ``3@2.1``): left out of
# idempotency keys, so every attempt sends the first one's.
_ATTEMPT = re.compile(r"@\d+")


def _no_binding(attr: str, value: Any) -> Any:
    return None


# How a class attribute of an application context is bound (a policy renamed
# after its attribute, a provider or an agent made callable as a step). The
# policy module, which builds on this one, installs it when it loads, so that
# this module does not import it.
_binder: Callable[[str, Any], Any] = _no_binding


def on_bind(binder: Callable[[str, Any], Any]) -> None:
    """Install how an application context class binds its attributes: the
    binder returns what replaces the attribute, or None to leave it be."""
    global _binder
    _binder = binder


class Context:
    """The engine, as seen from inside one step. Injected, never built by hand."""

    # ``_effects``: how many numbered idempotency keys this step took; unset
    # (no work per step) until the first ``next_idempotency_key``.
    __slots__ = ("__dict__", "_effects", "_key", "_n", "_seq", "_up", "_x")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Bind what an application context class holds, once, when the class
        is made: a policy whose name was not given is named after its
        attribute (``search = web_search`` is offered and recorded as
        ``search``), and a provider, an agent or any object standing for a
        policy becomes callable as a step (``await ctx.llm(observations=...)``),
        not as the bare object, whose ``__call__`` wants a context first."""
        super().__init_subclass__(**kwargs)
        for attr, value in list(vars(cls).items()):
            if attr.startswith("__"):
                continue
            bound = _binder(attr, value)
            if bound is not None and bound is not value:
                setattr(cls, attr, bound)

    def __init__(
        self, engine: Engine, key: str | None, up: Context | None = None, n: int = 0
    ) -> None:
        # ``key`` None: the child ``n`` of ``up``, its key spelled out only
        # when something asks for it (in memory, usually nothing does: B1).
        self._x = engine
        self._key = key
        self._up = up
        self._n = n
        self._seq = 0

    @property
    def key(self) -> str:
        """This step's key in the ledger (S1): ``""`` for the run's root, else
        the parent's key, a dot and the child's number."""
        k = self._key
        if k is None:
            up = self._up
            assert up is not None  # a context without a key always has a parent
            k = self._key = up.child_key(self._n)
        return k

    # -- which run and step ---------------------------------------------------
    @property
    def run_id(self) -> str:
        return self._x.run_id

    @property
    def step_key(self) -> str:
        """This step's key in the ledger ("" for the run's root)."""
        return self.key

    @property
    def idempotency_key(self) -> str:
        """The key another system dedupes this step's side effect by:
        ``<run id>:<step key>``, e.g. ``order-42:3`` (``order-42:`` for the
        run's root), computed when read.

        The same every time this step executes: on a retry (the attempt
        part of the key, ``@2``, is left out, in the keys of the step's
        children too) and when a resumed run executes it again. Distinct
        between steps, runs and child runs (a child's run id is its own),
        and between generations of a run that continued as new
        (``<run id>~<generation>:`` from the second on). Made of where the
        step is, never of its arguments: a step that sends other data
        under the same key is the same request to the other system. A fork
        is another run, with other keys. docs/side-effects.md.
        """
        x = self._x
        key = self.key
        if "@" in key:
            key = _ATTEMPT.sub("", key)
        generation = x.mailbox.generation
        if generation == 1:
            return f"{x.run_id}:{key}"
        return f"{x.run_id}{CHILD_MARK}{generation}:{key}"

    def next_idempotency_key(self) -> str:
        """The next of this step's numbered idempotency keys, for a step with
        several side effects: :attr:`idempotency_key`, ``/``, then 1, 2, ...
        in the order they are taken (``order-42:3/1``). Numbers count from 1
        again on each execution of the step (a retry, a resume), so the n-th
        side effect keeps its key as long as the step's code makes them in
        the same order."""
        n = self._effects = getattr(self, "_effects", 0) + 1
        return f"{self.idempotency_key}/{n}"

    @property
    def engine(self) -> Journaling:
        """The engine executing this context's run, as the journaling API
        layers use to run their own units of work durably (docs/journaling.md)."""
        return self._x

    def recast(self, cls: type[Context]) -> Context:
        """This step's context as an instance of ``cls``, its keys taken so far
        kept (a policy whose context class is known only once it is called)."""
        ctx = cls(self._x, self.key)
        ctx._seq = self._seq
        return ctx

    def next_key(self) -> str:
        """Take the key of this step's next child (S1): the parent's key, a
        dot, the next number. Take it synchronously, before any await, so that
        units started together keep their keys on every execution."""
        self._seq += 1
        return self.child_key(self._seq)

    def child_key(self, n: int) -> str:
        """The key of this step's child number ``n`` (taken or not)."""
        key = self.key
        return f"{key}.{n}" if key else str(n)

    def next_step_key(self) -> str:
        """The key this context's next step will take, without taking it:
        for code that must find that step's records (its children in the
        ledger) after it ran, such as a conversation's follow-ups."""
        return self.child_key(self._seq + 1)

    # -- calling -------------------------------------------------------------
    @overload
    def call(
        self, target: SupportsPolicy[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[R]: ...
    @overload
    def call(
        self, target: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[R]: ...
    def call(self, target: Any, /, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """Call a policy as a child step.

        The step key is taken now, before anything is awaited, so calls
        started together (``gather``, ``TaskGroup``) keep their keys on replay.
        Pass ``options=[...]`` to a policy that returns action calls, and the
        engine runs those calls and returns the messages followed by the
        results, in call order.
        """
        self._seq += 1
        return self._x.call_from(self, self._seq, target, args, kwargs)

    # -- streaming -----------------------------------------------------------
    def emit(self, value: Any) -> None:
        """Send ``value`` to whoever streams this run (nothing if nobody does).

        Code between steps runs again when a run resumes; if the call after
        this emit is already recorded, the emit was delivered the first time
        and is not delivered again.
        """
        x = self._x
        if x.listeners:
            x.emit(self.key, value, replayed=self.next_step_key() in x.replay)

    def stream_text(self, text: str) -> None:
        """Send a piece of text a model is producing (a token delta) to listeners.

        The step still records only its complete result; deltas are live only.
        """
        self._x.text_delta(self.key, text)

    # -- recorded services -----------------------------------------------------
    async def now(self) -> float:
        """The wall clock as a Unix timestamp, recorded so replay sees the same."""
        return float(await self._x.recorded(self.next_key(), "now", time.time))

    async def uuid(self) -> str:
        """A random UUID (hex string), recorded so replay sees the same."""
        return str(await self._x.recorded(self.next_key(), "uuid", lambda: str(_uuid.uuid4())))

    async def random(self) -> float:
        """A float in [0, 1), recorded so replay sees the same."""
        return float(await self._x.recorded(self.next_key(), "random", _random.random))

    async def sleep(self, seconds: float) -> None:
        """Sleep durably: a long sleep suspends the run and frees everything.

        The wake time is recorded the first time, so a run resumed after a
        crash wakes when it was meant to, not ``seconds`` after the restart.
        """
        await self._x.waits.sleep(self.next_key(), seconds)

    async def wait_for(
        self,
        signal: str,
        timeout: float | None = None,
        *,
        prompt: str | None = None,
        about: Any = None,
        schema: dict[str, Any] | None = None,
    ) -> Any:
        """Wait for ``runner.signal(run_id, signal, payload)`` and return the payload.

        Signals queue up: one sent before the run waits is not lost. With a
        ``timeout`` (seconds), raise :class:`TimeoutError` when none arrives.

        ``prompt`` and ``about`` say what the wait is for (a question, the
        details of what is to be approved: ``about={"amount": 120}``, any
        value a step may return). They are recorded just before the wait,
        so whoever lists the runs waiting for a human (``stalwart runs
        waiting``, the inspector) can show what each one asks. They are a
        note for readers: the run never reads them back, and changing them
        in new code does not change the run's steps.

        ``schema``: the JSON schema the payload should match
        (:mod:`~stalwart.core.expects`), recorded with the note: the
        inspector checks a payload against it before it sends one. The run
        does not check it: a payload sent another way arrives as sent.
        """
        if schema is not None:
            schema = check_schema(schema, f"wait_for({signal!r})")
        deadline_key = self.next_key()
        key = self.next_key()
        asked = None
        if prompt is not None or about is not None or schema is not None:
            asked = {"prompt": prompt, "signal": signal, "about": about}
            if schema is not None:
                asked["schema"] = schema
        return await self._x.waits.wait_for(deadline_key, key, signal, timeout, asked)

    async def ask(
        self,
        prompt: str,
        *,
        signal: str = "input",
        timeout: float | None = None,
        about: Any = None,
        schema: dict[str, Any] | None = None,
    ) -> Any:
        """Ask a human: emit ``prompt`` and wait for their answer as a signal.

        The prompt (and ``about``, any details the human needs, and
        ``schema``, the answer's JSON schema) is recorded with the wait, as
        :meth:`wait_for` says, so a person can see what is asked while the
        run is suspended, not only whoever streamed it live.
        """
        self.emit({"prompt": prompt, "signal": signal})
        return await self.wait_for(signal, timeout, prompt=prompt, about=about, schema=schema)

    # -- long-term memory ----------------------------------------------------------
    @property
    def memory(self) -> Memory:
        """The runner's long-term memory (:class:`~stalwart.core.memory.Memory`),
        each operation a recorded step of this run: a resumed run replays
        what it wrote and read without touching the memory tables."""
        return Memory(self._x.memory_store, ctx=self)

    # -- mailboxes ---------------------------------------------------------------
    async def send(self, to: str, payload: Any, *, kind: str = "message") -> str:
        """Send ``payload`` (JSON data) to run ``to``'s mailbox, as a step.

        Delivered exactly once: a resumed run whose send is recorded does not
        send again, and one that died between delivering and recording
        delivers under the same id, which the store keeps once. Returns that
        id. A recipient that does not exist (``RunNotFound``) or has finished
        (``MailboxClosed``) is this step's error, naming run and step.
        """
        return await self._x.mailbox.send(self.next_key(), to, payload, kind)

    async def receive(
        self,
        *,
        timeout: float | None = None,
        sender: str | None = None,
        kind: str | None = None,
    ) -> Any:
        """The oldest unread message in this run's mailbox, as a ``stalwart.Mail``
        (``payload``, ``sender``, ``kind``, ``sent_at``, ``id``).

        ``sender`` and ``kind`` keep only the messages from that run, of that
        kind; the others stay queued for a later receive. While none is
        there the run suspends, holding no memory or worker (S7), and
        resumes when a matching message arrives, from any process. With a
        ``timeout`` (seconds), raise :class:`TimeoutError` when none came.
        Recorded: a replay returns the same message.
        """
        deadline_key = self.next_key()
        key = self.next_key()
        mail: Any = await self._x.mailbox.receive(deadline_key, key, sender, kind, timeout)
        return mail

    # -- child runs --------------------------------------------------------------
    async def spawn(
        self,
        target: Any,
        /,
        *args: Any,
        queue: str | None = None,
        priority: int = 0,
        **kwargs: Any,
    ) -> Child:
        """Start ``target`` as a child run (on ``queue``, for any worker to take).

        Returns at once; ``await child.result()`` suspends this run until the
        child is done. The child's id derives from this step, so a replay
        finds the same child instead of starting another.
        """
        key = self.next_key()
        ids = await self._x.waits.spawn(key, target, [(args, kwargs)], queue, priority)
        return Child(self, ids[0])

    async def spawn_many(
        self,
        target: Any,
        calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]],
        *,
        queue: str | None = None,
        priority: int = 0,
    ) -> list[Child]:
        """Start ``target`` as one child run per ``(args, kwargs)`` of
        ``calls``, in one step: :meth:`results` then waits for all of them
        with one suspension, woken when the last one is done."""
        key = self.next_key()
        started = [_one_call(self.run_id, key, n, call) for n, call in enumerate(calls)]
        ids = await self._x.waits.spawn(key, target, started, queue, priority)
        return [Child(self, i) for i in ids]

    async def results(
        self, children: Sequence[Child], *, return_exceptions: bool = False
    ) -> list[Any]:
        """The results of ``children``, in their order, as one step: this run
        suspends (holding nothing) until every one is done. A child's error
        is raised, the first in order, or with ``return_exceptions`` given
        in its place (as ``asyncio.gather`` does)."""
        key = self.next_key()
        ids = [c.run_id for c in children]
        if not ids:
            return []
        outcomes = await self._x.waits.await_children(key, ids)
        out: list[Any] = []
        for child_id, outcome in zip(ids, outcomes, strict=True):
            try:
                out.append(_unwrap(self, key, child_id, outcome))
            except Exception as exc:
                if not return_exceptions:
                    raise
                out.append(exc)
        return out

    async def map(
        self,
        target: Any,
        items: Iterable[Any],
        *,
        queue: str | None = None,
        priority: int = 0,
    ) -> list[Any]:
        """Run ``target(item)`` as one child run per item, spread over every
        worker of ``queue``, and return the results in item order.

        This run suspends (holding nothing) while the children work. If a
        child failed, its error is raised.
        """
        key = self.next_key()
        waits = self._x.waits
        ids = await waits.spawn(key, target, [((item,), {}) for item in items], queue, priority)
        if not ids:
            return []
        key = self.next_key()
        outcomes = await waits.await_children(key, ids)
        return [_unwrap(self, key, i, o) for i, o in zip(ids, outcomes, strict=True)]

    async def patched(self, change: str) -> bool:
        """Whether this run takes the new code path of ``change``.

        Runs started before the change replay their old path (False); runs
        that reach this point live take the new one (True). Keep both paths
        until no run from before the change is left.
        """
        key = self.next_step_key()
        waits = self._x.waits
        if not waits.takes_patch(key, change):
            return False  # this run passed here on code without the change
        self._seq += 1  # taken before the await below, as every key is (S1)
        await waits.mark_patch(key, change)
        return True


class Child:
    """A child run started with :meth:`Context.spawn`."""

    __slots__ = ("_ctx", "run_id")

    def __init__(self, ctx: Context, run_id: str) -> None:
        self._ctx = ctx
        self.run_id = run_id

    async def result(self) -> Any:
        """The child's result (its error raised), suspending the parent meanwhile."""
        ctx = self._ctx
        key = ctx.next_key()
        outcomes = await ctx._x.waits.await_children(key, [self.run_id])
        return _unwrap(ctx, key, self.run_id, outcomes[0])


def _one_call(run_id: str, key: str, n: int, call: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Call ``n`` of a ``spawn_many``: an ``(args, kwargs)`` pair, else a
    TypeError naming the run, the step and the call (a string is not
    taken for a sequence of arguments, one a character)."""
    if isinstance(call, tuple | list) and len(call) == 2:
        args, kwargs = call
        if (
            isinstance(args, Sequence)
            and not isinstance(args, str | bytes)
            and isinstance(kwargs, Mapping)
            and all(isinstance(k, str) for k in kwargs)
        ):
            return tuple(args), dict(kwargs)
    raise TypeError(
        f"run {run_id!r}, step {key}: call {n} of spawn_many is {call!r:.80}; each call is "
        "a pair of positional arguments and keyword arguments, as ((1, 2), {'x': 3})"
    )


def _unwrap(ctx: Context, key: str, run_id: str, outcome: dict[str, Any]) -> Any:
    """A child's value, or its error raised. A child's outcome that cannot
    be read back (a corrupted row, a value no key opens) is not the child's
    error, for the policy to catch or keep: it halts this run (S14)."""
    if "value" in outcome:  # a child that ran in memory: the value itself
        return outcome["value"]
    if "exception" in outcome:
        raise outcome["exception"]
    try:
        return recorded_outcome(
            run_id, outcome["status"], outcome.get("result"), outcome.get("error")
        )
    except CorruptedRecord as bad:
        where = f"run {ctx.run_id!r}, step {key}: the outcome of child run {run_id!r}"
        raise ctx._x.halt(type(bad)(f"{where} cannot be read back: {bad}")) from None
