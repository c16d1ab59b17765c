"""The loop a conversation's run executes: receive a turn, answer it, reply.

:class:`ConversationLoop` takes a turn from its mailbox (``ctx.receive``,
suspended in between, S7), calls the agent with the message and the history
so far, sends the reply back, and waits for the next. The history is the
ledger: a resumed conversation rebuilds it by replay. Bounded for ever: past
``max_turns`` or ``max_bytes`` it continues as new with what the agent's
context policy keeps (see :mod:`.conversation`). Without history (a turn queue) it answers up to
``parallel`` queued turns at once, as a sliding window: as soon as one is
answered, the next queued turn starts (see :meth:`ConversationLoop._window`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ..core import codec
from ..core.context import Context
from ..core.engine.unwind import Suspend
from ..core.errors import StalwartError
from ..core.mail import Mail
from ..core.message import Message
from ..core.policy import Policy, as_policy
from .followups import offering_followups
from .ownership import owner_of, tracking_owner
from .turn import REPLY, TURN, message_text

__all__ = ["ConversationLoop"]

#: The longest a turn queue with a free place waits before it looks at its
#: mailbox on the store again, while other turns run.
_BUSY_POLL = 0.5


def _size(history: list[Message]) -> int:
    return len(codec.dumps(history, "a conversation's history"))


class ConversationLoop:
    """The policy a conversation's run executes (see the module's docstring).

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
            raise ValueError("parallel must be at least 1, and 1 for a conversation with history")
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
        # An llm.Agent with handoffs: the owner of each next turn is tracked
        # (see .ownership); any other agent's replies are written as before.
        self.hands_off = history and bool(getattr(agent, "handoffs", None))
        kind = "thread" if history else "turns"  # stored policy names: kept as written
        self.name = f"stalwart.{kind}:{self.pol.name}"
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self, name=self.name, description=f"The {kind} of {self.pol.name}."
        )

    async def __call__(
        self, ctx: Context, carried: list[Message] | None = None, generation: int = 1
    ) -> None:
        """Answer turns for ever (a conversation ends when it is cancelled)."""
        engine = ctx.engine
        durable = engine.durable
        history = list(carried or [])
        # Keys scoped by generation: child runs a tool spawns keep distinct ids.
        scope = engine.context(f"g{generation}") if durable else ctx
        if self.parallel > 1:
            while True:
                await self._window(scope)
                if durable:
                    await engine.mailbox.continue_as_new(
                        (), {"carried": None, "generation": generation + 1}
                    )
        turns = 0
        speaker = owner_of(history)  # the agent that owns the next turn
        while True:
            first = await scope.receive(kind=TURN)
            folded: list[Mail] = []
            handed: list[str] = []
            out = await self._answer(
                scope,
                first.payload,
                history,
                folded if self.followups == "inject" else None,
                handed if self.hands_off else None,
            )
            # A follow-up folded into this turn gets its reply, naming the turn.
            answered = [(first, out)] + [(m, {**out, "with": first.sender}) for m in folded]
            if self.history and "reply" in out:
                history += [Message.user(message_text(m.payload)) for m in (first, *folded)]
                speaker = handed[-1] if handed else speaker
                history.append(Message.assistant(message_text(out["reply"]), actor=speaker))
            for mail, out in answered:
                await self._reply(scope, mail, out)
            turns += len(answered)
            if turns >= self.max_turns or (self.history and _size(history) > self.max_bytes):
                history = await self._carry(scope, history) if self.history else []
                turns = 0
                if durable:
                    await engine.mailbox.continue_as_new(
                        (), {"carried": history or None, "generation": generation + 1}
                    )

    async def _window(self, scope: Context) -> None:
        """A turn queue's generation: up to ``parallel`` turns answered at once,
        each queued turn started as soon as a place is free (a turn answered,
        or a turn put while fewer are running), until ``max_turns`` were taken
        (then the caller continues as new).

        Keys never depend on the order turns finish in (S1): each turn's
        steps are keyed under a scope of its own (``t<n>`` for the n-th turn
        taken) and its reply is sent from its own task; the only steps on
        ``scope`` are the receives, the n-th turn taken by the n-th receive,
        which is tried again under the same keys until a message is there.
        While turns run, a durable receive that finds nothing is tried again
        a little later (a read of the mailbox, nothing recorded) instead of
        suspending the run; with nothing running it suspends it (S7).
        """
        engine = scope.engine
        running: set[asyncio.Future[Any]] = set()
        taking: asyncio.Future[Mail] | None = None  # the receive under way
        keys: tuple[str, str] | None = None  # its keys, kept until it takes a message
        taken = 0
        try:
            while True:
                if taken < self.max_turns and len(running) < self.parallel:
                    if keys is None:
                        keys = (scope.next_key(), scope.next_key())
                    if not running:  # nothing to wait for but a message
                        mail = await self._stop_taking(taking)
                        taking = None
                        if mail is None:
                            mail = await engine.mailbox.receive(*keys, None, TURN, None)
                        keys = None
                        taken += 1
                        running.add(self._start_turn(scope, taken, mail))
                        continue
                    if taking is None:
                        taking = asyncio.ensure_future(self._take_while_busy(engine, keys))
                elif not running:
                    return  # max_turns taken and answered
                either = running | ({taking} if taking is not None else set())
                done, _ = await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if taking is not None and taking in done:
                    mail, taking, keys = taking.result(), None, None
                    taken += 1
                    running.add(self._start_turn(scope, taken, mail))
                for task in done & running:
                    running.discard(task)
                    task.result()  # a turn's error is in its reply; only the run's own go up
        finally:
            for task in (*running, *([taking] if taking is not None else [])):
                task.cancel()
            if running or taking is not None:
                await asyncio.wait([*running, *([taking] if taking is not None else [])])

    def _start_turn(self, scope: Context, n: int, mail: Mail) -> asyncio.Future[Any]:
        engine = scope.engine
        own = engine.context(f"{scope.key}.t{n}") if engine.durable else scope
        return asyncio.ensure_future(self._one_turn(own, mail))

    @staticmethod
    async def _take_while_busy(engine: Any, keys: tuple[str, str]) -> Mail:
        """The next turn, taken while others run: in memory a plain wait; on a
        store, the same receive tried again (backing off) while none is there."""
        pause = 0.02
        while True:
            try:
                mail: Mail = await engine.mailbox.receive(*keys, None, TURN, None)
                return mail
            except Suspend:
                await asyncio.sleep(pause)
                pause = min(pause * 2, _BUSY_POLL)

    @staticmethod
    async def _stop_taking(taking: asyncio.Future[Mail] | None) -> Mail | None:
        """Stop a receive under way; the message it took, if it took one."""
        if taking is None:
            return None
        taking.cancel()
        await asyncio.wait([taking])
        if taking.cancelled() or taking.exception() is not None:
            return None
        return taking.result()

    async def _one_turn(self, scope: Context, mail: Mail) -> None:
        """Answer one turn of a turn queue and send its caller the reply."""
        out = await self._answer(scope, mail.payload, None)
        await self._reply(scope, mail, out)

    async def _reply(self, scope: Context, mail: Mail, out: dict[str, Any]) -> None:
        if mail.sender is not None:
            try:
                await scope.send(mail.sender, out, kind=REPLY)
            except LookupError:
                pass  # the caller's turn is gone (pruned): nobody to tell
            except StalwartError:
                pass  # its turn finished (cancelled): nobody waits

    async def _answer(
        self,
        scope: Context,
        message: Any,
        history: list[Message] | None,
        folded: list[Mail] | None = None,
        handed: list[str] | None = None,
    ) -> dict[str, Any]:
        """The agent's reply to ``message`` (or its error). With ``folded``,
        the agent may take follow-ups before its model calls: they are
        appended to ``folded``, in the order taken. With ``handed``, the agent
        the answer last handed the conversation to, if any, is appended to it."""
        kwargs: dict[str, Any] = {"question": message_text(message)}
        if history is not None and self.history:
            kwargs["history"] = list(history)
        scope.emit({"turn": "started"})

        async def reply() -> dict[str, Any]:
            try:
                if handed is None:
                    return {"reply": await scope.call(self.agent, **kwargs)}
                value, to = await tracking_owner(scope, lambda: scope.call(self.agent, **kwargs))
                handed.extend([to] if to is not None else [])
                return {"reply": value}
            except Exception as exc:  # the agent's recorded failure: the turn's, not the whole's
                return {"error": f"{type(exc).__name__}: {exc}"}

        if folded is None:
            return await reply()
        return await offering_followups(scope, folded, reply)

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
        return f"<ConversationLoop {self.name}>"
