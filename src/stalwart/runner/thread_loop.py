"""The loop a thread's run executes: receive a turn, answer it, reply.

:class:`ThreadLoop` takes a turn from its mailbox (``ctx.receive``,
suspended in between, S7), calls the agent with the message and the history
so far, sends the reply back, and waits for the next. The history is the
ledger: a resumed thread rebuilds it by replay. Bounded for ever: past
``max_turns`` or ``max_bytes`` it continues as new with what the agent's
context policy keeps (see :mod:`.threads`). Without history (a turn queue) it answers up to
``parallel`` queued turns at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ..core import codec
from ..core.context import Context
from ..core.errors import StalwartError
from ..core.mail import Mail
from ..core.message import Message
from ..core.policy import Policy, as_policy
from .followups import offering_followups
from .turn import REPLY, TURN, message_text

__all__ = ["ThreadLoop"]


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
                    history += [Message.user(message_text(m.payload)) for m in (first, *folded)]
                    history.append(Message.assistant(message_text(out["reply"])))
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
        kwargs: dict[str, Any] = {"question": message_text(message)}
        if history is not None and self.history:
            kwargs["history"] = list(history)
        scope.emit({"turn": "started"})

        async def reply() -> dict[str, Any]:
            try:
                return {"reply": await scope.call(self.agent, **kwargs)}
            except Exception as exc:  # the agent's recorded failure: this turn's, not the thread's
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
        return f"<ThreadLoop {self.name}>"
