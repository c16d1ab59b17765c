"""The journal of one execution: its state, its ledger writes, and what
listeners see.

:class:`Journal` holds what every part of the engine shares: the run, the
ledger and the fencing token of its claim, the replay map loaded when the run
resumed (S2), hooks and listeners. Every ledger write goes through
:meth:`Journal.write`, so the first one a store refuses halts the execution
(S6, S8, S14); :meth:`Journal.replayed_value` answers a recorded step after
checking its identity (S5), raising its recorded error (S4).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from .. import codec
from ..errors import CorruptedRecord, NonDeterminismError, StalwartError, StoreError
from ..events import CallFailed, CallFinished, Emitted, Hook, TextDelta
from ..ledger import Ledger, StoredStep
from ..policy import Policy
from ..recorded import error_from_json
from ..stepargs import full_args
from .argslog import ArgsLog
from .control import Halt

T = TypeVar("T")

__all__ = ["Host", "Journal"]


class Host(Protocol):
    """What an execution needs from its runner to start and await child runs."""

    async def spawn_children(
        self,
        parent: Journal,
        pol: Policy[Any, Any],
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        ids: list[str],
        queue: str | None,
        priority: int,
    ) -> None: ...

    async def await_memory_children(self, ids: list[str]) -> list[dict[str, Any]]: ...

    def find_policy(self, name: str) -> Policy[Any, Any] | None:
        """The runner's policy of that name (an option offered by name)."""
        ...

    def live_execution(self, run_id: str) -> Journal | None:
        """The execution of ``run_id`` if it runs in this process (in-memory mail)."""
        ...

    def wake_worker(self) -> None:
        """Make the runner look for ready runs now (a recipient woke)."""
        ...


class Journal:
    """The state of one run being executed in this process, and its ledger."""

    def __init__(
        self,
        run_id: str,
        *,
        store: Ledger | None = None,
        fence: int = 0,
        replay: dict[str, StoredStep] | None = None,
        hooks: Sequence[Hook] = (),
        max_parallel: int | None = None,
        inline_sleep: float = 1.0,
    ) -> None:
        self.run_id = run_id
        self.host: Host | None = None
        self.parent_id: str | None = None
        self.queue = "default"
        self.store = store
        self.fence = fence
        self.replay = replay or {}
        self.hooks = tuple(hooks)
        self.listeners: list[asyncio.Queue[Any]] = []
        self.max_parallel = max_parallel
        self.inline_sleep = inline_sleep
        self.halted: StalwartError | None = None
        self.live_steps = 0  # steps that executed for real in this execution
        self.replayed_steps = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._mailbox: dict[str, deque[Any]] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._decoded: dict[str, dict[str, Any]] = {}
        # The list arguments of recent steps: what is new in the next (S1, S5).
        self.args_log = ArgsLog(run_id)
        self._refresh()

    def _refresh(self) -> None:
        self.plain = self.store is None and not self.hooks and not self.listeners

    # -- the journaling API (docs/journaling.md) -------------------------------
    @property
    def durable(self) -> bool:
        """Whether this run records its steps: a layer above keys and records
        its units only then, and in memory runs its user code as is."""
        return self.store is not None

    @property
    def watched(self) -> bool:
        """Whether someone streams this run: events are built only then."""
        return bool(self.listeners)

    def replayed_values(self, kind: str) -> dict[str, Any]:
        """The decoded values of every replayed record of ``kind`` (written by
        :meth:`recorded`), by key; decoded once per execution.

        What a layer reads to rebuild its own state before it goes live (a
        flow's shared store); a record that cannot be read halts the run.
        """
        values = self._decoded.get(kind)
        if values is None:
            name = f"stalwart.{kind}"
            values = {
                key: self.decode_output(rec, key)
                for key, rec in self.replay.items()
                if rec.name == name
            }
            self._decoded[kind] = values
        return values

    def listen(self, queue: asyncio.Queue[Any]) -> None:
        self._loop = asyncio.get_running_loop()
        self.listeners.append(queue)
        self._refresh()

    def unlisten(self, queue: asyncio.Queue[Any]) -> None:
        if queue in self.listeners:
            self.listeners.remove(queue)
        self._refresh()

    def publish(self, event: Any) -> None:
        if self._loop is not None and not _in_loop(self._loop):
            # emit() from a sync policy's worker thread: hand over to the loop.
            self._loop.call_soon_threadsafe(self.publish, event)
            return
        for q in self.listeners:
            q.put_nowait(event)

    def emit(self, key: str, value: Any, *, replayed: bool = False, marked: bool = False) -> None:
        """Deliver ``value`` to listeners, unless it is a ``replayed`` emit.

        ``marked``: the value says itself whether it is a replay (a flow's
        node events do), so it is delivered either way.
        """
        if self.listeners and (marked or not replayed):
            self.publish(Emitted(self.run_id, key, value))

    def text_delta(self, key: str, text: str) -> None:
        if self.listeners:  # only a live call streams text: a replayed one has its result
            self.publish(TextDelta(self.run_id, key, text))

    async def record_step(self, rec: StoredStep) -> StoredStep:
        """Record a step's outcome; the first refused write halts the run.

        :meth:`write`, inlined: this is on every durable step's path.
        """
        assert self.store is not None
        if self.halted is not None:
            raise Halt(self.halted)
        try:
            won = await self.store.record_step(self.run_id, self.fence, rec)
        except StoreError as exc:
            raise self.halt(exc) from exc
        self.live_steps += 1
        return won

    async def write(self, write: Awaitable[T]) -> T:
        """A store call for this run; the first one that fails halts it."""
        if self.halted is not None:
            close = getattr(write, "close", None)
            if close is not None:
                close()  # never awaited: say so to the coroutine, not to the GC
            raise Halt(self.halted)
        try:
            return await write
        except StoreError as exc:
            raise self.halt(exc) from exc

    def halt(self, cause: StalwartError) -> Halt:
        """Stop this execution for good: every later step raises the same.

        Public for layers above the core: a record of theirs that does not
        fit (nondeterminism, corruption) is the run's problem, not a step's
        (S5, S14). Raise what it returns.
        """
        if self.halted is None:
            self.halted = cause
        return Halt(self.halted)

    def replayed_value(
        self,
        rec: StoredStep,
        key: str,
        name: str,
        args_json: str,
        args_hash: str,
        publish: bool = True,
        *,
        full: Callable[[], str] | None = None,
    ) -> Any:
        """A recorded step's outcome, after checking it is the same call (S5):
        its value, or its recorded error raised (S4).

        ``args_json`` is the call's arguments as it would record them;
        ``full`` builds their whole JSON when that record is compact
        (``core/stepargs.py``): both sides of a mismatch are shown whole.
        """
        if rec.name != name or rec.args_hash != args_hash:
            try:
                recorded = full_args(self.run_id, rec, self.replay)
            except CorruptedRecord as bad:
                raise self.halt(bad) from None
            raise self.halt(
                NonDeterminismError(
                    f"step {key} of run {self.run_id} does not match its record:\n"
                    f"  recorded: {rec.name}({recorded})\n"
                    f"  now:      {name}({args_json if full is None else full()})\n"
                    "The policy's code changed, or it is not deterministic; "
                    "guard changed code with `await ctx.patched(...)`."
                )
            )
        self.replayed_steps += 1
        if rec.error is not None:
            try:
                exc = error_from_json(rec.error, f"error of step {key} of run {self.run_id!r}")
            except CorruptedRecord as bad:
                raise self.halt(bad) from None
            if self.listeners and publish:
                self.publish(CallFailed(self.run_id, key, name, type(exc).__name__, str(exc), True))
            raise exc
        value = self.decode_output(rec, key)
        if self.listeners and publish:
            self.publish(CallFinished(self.run_id, key, name, value, 0.0, True))
        return value

    def decode_output(self, rec: StoredStep, key: str) -> Any:
        """A record's output as a value; one that cannot be read halts the run."""
        where = f"step {key} of run {self.run_id!r}: the recorded output cannot be read back"
        try:
            return codec.loads(rec.output or "null", where)
        except CorruptedRecord as bad:
            raise self.halt(bad) from None

    async def recorded(self, key: str, kind: str, make: Callable[[], Any]) -> Any:
        """Replay the value recorded at ``key``, or ``make()`` it and record it.

        For values the run must see again on replay (time, ids, a layer's own
        journal entries): ``make`` runs only live, and the record is named
        ``stalwart.<kind>`` so that another kind at ``key`` is nondeterminism.
        """
        if self.store is None:
            return make()
        rec = self.replay.get(key)
        if rec is not None:
            return self.replayed_value(rec, key, f"stalwart.{kind}", "{}", "", publish=False)
        value = make()
        await self.record_value(key, kind, value)
        return value

    async def record_value(
        self,
        key: str,
        kind: str,
        value: Any,
        error: str | None = None,
        *,
        args_json: str | None = None,
        args_hash: str = "",
    ) -> None:
        """Record ``value`` (or ``error``) as the runtime's own step ``kind``;
        ``args_json``/``args_hash``: what a replay checks it against (S5), for
        records that stand in for a call with arguments."""
        assert self.store is not None
        now = time.time()
        rec = StoredStep(
            key=key,
            name=f"stalwart.{kind}",
            args_hash=args_hash,
            args=args_json,
            output=None if error else codec.dumps(value, f"step {key}"),
            error=error,
            attempts=1,
            started_at=now,
            finished_at=now,
            kind=kind,
        )
        await self.write(self.store.record_step(self.run_id, self.fence, rec))
        self.live_steps += 1


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
