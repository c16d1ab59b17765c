"""Context: how a running policy reaches the runtime.

A context belongs to one step. It hands out child step keys (S1) in the order
calls are made, synchronously, so that concurrent calls get the same keys on
every execution; and it gives the policy the runtime's recorded services:
durable sleep, signals, and recorded time, ids and randomness.

Subclass it to bind policies as typed attributes::

    class App(sw.Context):
        search = web_search          # ``await ctx.search(query=...)``
"""

from __future__ import annotations

import random as _random
import time
import uuid as _uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from .ledger import StepRecord
from .recorded import recorded_outcome

__all__ = ["Child", "Context", "Engine", "SupportsPolicy"]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class SupportsPolicy(Protocol[P, R_co]):
    """Anything that can stand for a policy (a PocketFlow flow, an agent...)."""

    @property
    def __stalwart_policy__(self) -> Callable[P, Awaitable[R_co]]: ...


class Engine(Protocol):
    """What a context reaches: the execution of its run
    (:class:`~stalwart.core.engine.execution.Execution`)."""

    run_id: str
    listeners: list[Any]
    replay: dict[str, StepRecord]

    def step(
        self, key: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Coroutine[Any, Any, Any]: ...
    def emit(
        self, key: str, value: Any, *, replayed: bool = False, marked: bool = False
    ) -> None: ...
    def text_delta(self, key: str, text: str) -> None: ...
    async def recorded(self, key: str, kind: str, make: Callable[[], Any]) -> Any: ...
    async def sleep(self, key: str, seconds: float) -> None: ...
    async def wait_for(
        self, deadline_key: str, key: str, name: str, timeout: float | None
    ) -> Any: ...
    async def spawn(
        self,
        key: str,
        target: Any,
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        queue: str | None,
        priority: int,
    ) -> list[str]: ...
    async def await_children(self, key: str, ids: list[str]) -> list[dict[str, Any]]: ...
    async def patched(self, parent_key: str, ctx: Context, change: str) -> bool: ...


class Context:
    """The runtime, as seen from inside one step. Injected, never built by hand."""

    __slots__ = ("__dict__", "_seq", "_x", "key")

    def __init__(self, execution: Engine, key: str) -> None:
        self._x = execution
        self.key = key
        self._seq = 0

    # -- identity -------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self._x.run_id

    @property
    def step_key(self) -> str:
        """This step's key in the ledger ("" for the run's root)."""
        return self.key

    def _next_key(self) -> str:
        self._seq += 1
        return f"{self.key}.{self._seq}" if self.key else str(self._seq)

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
        runtime runs those calls and returns the messages followed by the
        results, in call order.
        """
        self._seq += 1
        key = f"{self.key}.{self._seq}" if self.key else str(self._seq)
        return self._x.step(key, target, args, kwargs)

    # -- streaming -----------------------------------------------------------
    def emit(self, value: Any) -> None:
        """Send ``value`` to whoever streams this run (nothing if nobody does).

        Code between steps runs again when a run resumes; if the call after
        this emit is already recorded, the emit was delivered the first time
        and is not delivered again.
        """
        x = self._x
        if x.listeners:
            after = f"{self.key}.{self._seq + 1}" if self.key else str(self._seq + 1)
            x.emit(self.key, value, replayed=after in x.replay)

    def stream_text(self, text: str) -> None:
        """Send a piece of text a model is producing (a token delta) to listeners.

        The step still records only its complete result; deltas are live only.
        """
        self._x.text_delta(self.key, text)

    # -- recorded services -----------------------------------------------------
    async def now(self) -> float:
        """The wall clock as a Unix timestamp, recorded so replay sees the same."""
        return float(await self._x.recorded(self._next_key(), "now", time.time))

    async def uuid(self) -> str:
        """A random UUID (hex string), recorded so replay sees the same."""
        return str(await self._x.recorded(self._next_key(), "uuid", lambda: str(_uuid.uuid4())))

    async def random(self) -> float:
        """A float in [0, 1), recorded so replay sees the same."""
        return float(await self._x.recorded(self._next_key(), "random", _random.random))

    async def sleep(self, seconds: float) -> None:
        """Sleep durably: a long sleep suspends the run and frees everything.

        The wake time is recorded the first time, so a run resumed after a
        crash wakes when it was meant to, not ``seconds`` after the restart.
        """
        await self._x.sleep(self._next_key(), seconds)

    async def wait_for(self, signal: str, timeout: float | None = None) -> Any:
        """Wait for ``runner.signal(run_id, signal, payload)`` and return the payload.

        Signals queue up: one sent before the run waits is not lost. With a
        ``timeout`` (seconds), raise :class:`TimeoutError` when none arrives.
        """
        deadline_key = self._next_key()
        key = self._next_key()
        return await self._x.wait_for(deadline_key, key, signal, timeout)

    async def ask(self, prompt: str, *, signal: str = "input", timeout: float | None = None) -> Any:
        """Ask a human: emit ``prompt`` and wait for their answer as a signal."""
        self.emit({"prompt": prompt, "signal": signal})
        return await self.wait_for(signal, timeout)

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
        key = self._next_key()
        ids = await self._x.spawn(key, target, [(args, kwargs)], queue, priority)
        return Child(self, ids[0])

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
        key = self._next_key()
        ids = await self._x.spawn(key, target, [((item,), {}) for item in items], queue, priority)
        if not ids:
            return []
        outcomes = await self._x.await_children(self._next_key(), ids)
        return [_unwrap(child_id, o) for child_id, o in zip(ids, outcomes, strict=True)]

    async def patched(self, change: str) -> bool:
        """Whether this run takes the new code path of ``change``.

        Runs started before the change replay their old path (False); runs
        that reach this point live take the new one (True). Keep both paths
        until no run from before the change is left.
        """
        return await self._x.patched(self.key, self, change)


class Child:
    """A child run started with :meth:`Context.spawn`."""

    __slots__ = ("_ctx", "run_id")

    def __init__(self, ctx: Context, run_id: str) -> None:
        self._ctx = ctx
        self.run_id = run_id

    async def result(self) -> Any:
        """The child's result (its error raised), suspending the parent meanwhile."""
        outcomes = await self._ctx._x.await_children(self._ctx._next_key(), [self.run_id])
        return _unwrap(self.run_id, outcomes[0])


def _unwrap(run_id: str, outcome: dict[str, Any]) -> Any:
    if "value" in outcome:  # a child that ran in memory: the value itself
        return outcome["value"]
    if "exception" in outcome:
        raise outcome["exception"]
    return recorded_outcome(run_id, outcome["status"], outcome.get("result"), outcome.get("error"))
