"""The engine: the one object that executes a run in this process.

:class:`Engine` holds what every part shares: the run, the ledger and the
fencing token of its claim, the replay map loaded when the run resumed (S2),
hooks and listeners. It executes steps: in memory (``store is None``) a call
with no hook, listener, retry or timeout takes a fast path that costs little
more than the ``await`` itself; with a store, each call is looked up in the
replay map: a recorded call returns its result (or raises its error, S4)
without executing, after its identity is checked (S5); an unrecorded call
executes live and its outcome is recorded under its key before the caller
sees it (S3, S11). Every ledger write goes through :meth:`Engine.write` (or
its inlined copy on the step's path), so the first one a store refuses halts
the run (S6, S8, S14).

Its parts, each given the engine when it is made: :attr:`Engine.waits`
(durable sleep, signals, patch markers, child runs: ``waits.py``),
:attr:`Engine.mailbox` (messages between runs, continue-as-new:
``mailbox.py``) and :attr:`Engine.dispatch` (the action calls of a step
offered options: ``dispatch.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from .. import codec
from ..context import Context
from ..errors import CorruptedRecord, NonDeterminismError, StalwartError, StoreError, Veto
from ..events import CallFailed, CallFinished, CallInfo, CallStarted, Emitted, Hook, TextDelta
from ..ledger import Ledger, StoredStep
from ..memory import MemoryLedger
from ..policy import Policy, as_policy, current_step, on_detached_call
from ..recorded import error_from_json, error_to_json, warn_rebuilt
from ..stepargs import full_args, is_compact
from .dispatch import Dispatch
from .identity import OPTIONS, ArgsLog, args_for_record, check_keywords, identity_json, step_hash
from .mailbox import Mailbox
from .unwind import NOT_STEP_ERRORS, Halt, as_exception, is_step_failure
from .waits import Waits

__all__ = ["Engine", "Host", "Unit", "run_detached"]

T = TypeVar("T")

#: Retries are logged here (a warning each): a step that keeps failing is the
#: first thing an operator looks for.
_log = logging.getLogger("stalwart.engine")


class Host(Protocol):
    """What an engine needs from its runner to start and await child runs."""

    async def spawn_children(
        self,
        parent: Engine,
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

    def live_engine(self, run_id: str) -> Engine | None:
        """The engine of ``run_id`` if it runs in this process (in-memory mail)."""
        ...

    def wake_worker(self) -> None:
        """Make the runner look for ready runs now (a recipient woke)."""
        ...


class _Step:
    """One live call: its identity as recorded, its attempts and start time."""

    __slots__ = ("args_hash", "args_json", "full", "info", "key", "n", "pol", "recorded", "started")

    def __init__(self, key: str, pol: Policy[Any, Any] | Unit, *, recorded: bool) -> None:
        self.key = key
        self.pol = pol
        self.recorded = recorded  # written to the ledger (a store, a recorded policy, not the root)
        self.args_json = self.args_hash = ""  # as recorded (compact: core/stepargs.py)
        self.full: Callable[[], str] | None = None  # the whole JSON, when args_json is compact
        self.info: CallInfo | None = None
        self.n = 0  # attempts so far
        self.started = time.time()


class Unit:
    """A unit of work that is not a policy, run as one step by
    :meth:`Engine.run_unit`: recorded, one attempt, no timeout (the work
    retries itself if it wants to), never an options dispatch. Its ``args``
    are its identity only (S1, S5); ``work`` gets just the unit's context.
    It has the attributes of a :class:`Policy` that a step reads."""

    __slots__ = ("name", "work")
    record = True
    simple = True
    declared = True  # nothing to declare: whoever runs a unit reads its value back
    ctx_class: type[Context] | None = None

    def __init__(self, name: str, work: Callable[[Context], Awaitable[Any]]) -> None:
        self.name = name
        self.work = work

    def invoke(self, ctx: Context, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[Any]:
        return self.work(ctx)

    def declare_types(self) -> None:
        """Nothing to declare (``declared`` is always true)."""


class Engine:
    """One run being executed in this process: its state, its steps, their
    replay and recording, and every write to its ledger. Nothing inherits
    from it; its parts (:attr:`waits`, :attr:`mailbox`, :attr:`dispatch`)
    are given it when it is made."""

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
        # The run's tags as its record keeps them (JSON text): its children's.
        self.tags: str | None = None
        self.store = store
        # Where ctx.memory keeps long-term memory: the runner's store, set by
        # whoever executes the run (in memory too, where ``store`` is None).
        self.memory_store: MemoryLedger | None = None
        self.fence = fence
        self.replay = replay or {}
        self.hooks = tuple(hooks)
        self.listeners: list[asyncio.Queue[Any]] = []
        self.max_parallel = max_parallel
        self.inline_sleep = inline_sleep
        self.halted: StalwartError | None = None
        # A fork being rebased onto new code (timetravel/rebase.py): a record
        # whose call differs takes the identity the code gives it (name, whole
        # arguments' JSON, hash) instead of halting. Read only on a mismatch.
        self.adopted: dict[str, tuple[str, str, str]] | None = None
        self.live_steps = 0  # steps that executed for real in this execution
        self.replayed_steps = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._decoded: dict[str, dict[str, Any]] = {}
        # The list arguments of recent steps: what is new in the next (S1, S5).
        self.args_log = ArgsLog(run_id)
        # The parts, each holding this engine.
        self.waits = Waits(self)
        self.mailbox = Mailbox(self)
        self.dispatch = Dispatch(self)
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

    # -- writes and replay -------------------------------------------------------
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
            if self.adopted is None:
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
            self.adopted[key] = (name, args_json if full is None else full(), args_hash)
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
        records): ``make`` runs only live, and the record is named
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
        """Record ``value`` (or ``error``) as the engine's own step ``kind``;
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

    # -- steps -------------------------------------------------------------
    def step(
        self, key: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Coroutine[Any, Any, Any]:
        """Run ``target`` as the step ``key`` of this run (``Context.call``)."""
        if self.halted is not None:
            raise Halt(self.halted)
        pol = target if type(target) is Policy else as_policy(target)
        if kwargs and OPTIONS in kwargs:
            return self._offering(key, pol, args, kwargs)
        if self.plain and pol.simple:
            return self._plain((pol.ctx_class or Context)(self, key), pol, args, kwargs)
        return self._full(key, pol, args, kwargs)

    def call_from(
        self,
        up: Context,
        n: int,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Coroutine[Any, Any, Any]:
        """``Context.call``: the child ``n`` of step ``up``. On the in-memory
        fast path the child's key is not spelled out unless asked for: the
        string costs more than the rest of the call's bookkeeping (B1)."""
        if kwargs and "*" in kwargs:  # in memory too (check_keywords); empty: one test (B1)
            check_keywords(kwargs, up.child_key(n), self.run_id)
        if self.halted is not None:
            raise Halt(self.halted)
        pol = target if type(target) is Policy else as_policy(target)
        if self.plain and pol.simple and not (kwargs and OPTIONS in kwargs):
            return self._plain((pol.ctx_class or Context)(self, None, up, n), pol, args, kwargs)
        return self.step(up.child_key(n), pol, args, kwargs)

    async def _offering(
        self,
        key: str,
        pol: Policy[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        root: bool = False,
    ) -> Any:
        """A step offered ``options``: the reply's action calls run as steps
        of their own once the step's outcome is known, live or replayed."""
        kwargs = self.dispatch.offered(kwargs)  # options named or given as specs: their policies
        if self.plain and pol.simple:
            result = await self._plain((pol.ctx_class or Context)(self, key), pol, args, kwargs)
        else:
            result = await self._full(key, pol, args, kwargs, root)
        return await self.dispatch.run(key, result, kwargs[OPTIONS], pol)

    async def _plain(
        self, ctx: Context, pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """In memory, nobody watching, no retry or timeout: just the call."""
        token = current_step.set(ctx)
        try:
            if pol.takes_ctx:
                return await pol.fn(ctx, *args, **kwargs)
            return await pol.fn(*args, **kwargs)
        except BaseException as caught:
            if isinstance(caught, Exception) or not is_step_failure(caught):
                raise
            raise as_exception(caught) from caught
        finally:
            current_step.reset(token)

    async def _full(
        self,
        key: str,
        pol: Policy[Any, Any] | Unit,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        root: bool = False,
        started: float | None = None,
    ) -> Any:
        """One step, in the contract's order: replay if recorded (S2, S5),
        else execute (retries, timeout), record the outcome (S3, S4, S11),
        and only then let the caller see it."""
        # The hot path of every durable step: each coroutine added here costs
        # B2, hence the single attempt inlined below rather than a method.
        step = _Step(key, pol, recorded=self.store is not None and pol.record and not root)
        if started is not None:  # a unit whose work ran before it was recorded
            step.started = started
        if step.recorded:
            rec = self._identify(step, args, kwargs)
            if rec is not None:  # S2: answered from the ledger, nothing executes
                if self.hooks:
                    value = await self._replayed(step, rec, args, kwargs)
                else:
                    value = self.replayed_value(
                        rec, key, pol.name, step.args_json, step.args_hash, full=step.full
                    )
                self.args_log.output(key, value, rec.output)  # later arguments may hold it
                return value
        if self.hooks or self.listeners:
            self._announce(step, args, kwargs)
        try:
            for hook in self.hooks:
                await hook.before_call(step.info)  # type: ignore[arg-type]
            if pol.simple:  # one attempt, no timeout: no retry loop to enter
                step.n = 1
                ctx = (pol.ctx_class or Context)(self, key)
                token = current_step.set(ctx)
                try:
                    result = await pol.invoke(ctx, args, kwargs)
                finally:
                    current_step.reset(token)
            else:
                assert isinstance(pol, Policy)  # a Unit is always simple
                result = await self._attempts(key, pol, args, kwargs, step)
            output = None
            if step.recorded:  # S11: a value that cannot be recorded is the step's error
                output = codec.dumps(result, f"result of step {key} ({pol.name})")
        except BaseException as caught:
            if not is_step_failure(caught):
                raise
            return await self._failure(step, caught)  # S4
        if step.recorded:
            rec = self._record_of(step, output, None)
            # Engine.record_step, inlined: one coroutine less on every step.
            if self.halted is not None:
                raise Halt(self.halted)
            try:
                won = await self.store.record_step(self.run_id, self.fence, rec)  # type: ignore[union-attr]
            except StoreError as exc:
                raise self.halt(exc) from exc
            self.live_steps += 1
            self.args_log.commit(key)  # later steps' records may refer to its arguments
            if won is not rec:  # S3: the first recorded outcome wins, for every reader
                if won.args_hash != step.args_hash or won.name != pol.name:
                    won = await self._readable(won)  # nondeterminism: show it whole
                result = self.replayed_value(
                    won, key, pol.name, step.args_json, step.args_hash, full=step.full
                )
            self.args_log.output(key, result, won.output)
        if step.info is not None:
            await self._finished(step, result)
        return result

    async def _readable(self, won: StoredStep) -> StoredStep:
        """The record another worker won a race with, its arguments whole: a
        compact record may refer to steps recorded after this execution read
        the ledger, so they are read again. Only ever for a nondeterminism
        error, whose message shows both calls; arguments that still cannot
        be rebuilt are shown as why, never as a CorruptedRecord in its place."""
        if not is_compact(won.args):
            return won
        load = getattr(self.store, "load_stored_steps", None)
        try:
            steps = dict(await load(self.run_id)) if load is not None else {}
            text = full_args(self.run_id, won, {**steps, **self.replay})
        except (StoreError, CorruptedRecord) as exc:
            text = f"<arguments not readable: {exc}>"
        return dataclasses.replace(won, args=text)

    def _identify(
        self, step: _Step, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> StoredStep | None:
        """The step's identity as recorded (S1, S5), and its record if replayed."""
        pol = step.pol
        if not pol.declared:  # its values are read back as the types it declares (S13)
            pol.declare_types()
        step.args_json, step.args_hash, step.full = self.args_log.identify(args, kwargs, step.key)
        rec = self.replay.get(step.key)
        if rec is not None:
            self.args_log.commit(step.key)  # in the ledger already
        return rec

    async def _replayed(
        self, step: _Step, rec: StoredStep, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A recorded step answered for hooks that watch replays (a tracer
        marks it replayed and, for a model call, emits no model-call span)."""
        info = CallInfo(self.run_id, step.key, step.pol.name, args_for_record(args, kwargs))
        try:
            value = self.replayed_value(
                rec, step.key, step.pol.name, step.args_json, step.args_hash, full=step.full
            )
        except Exception as exc:
            for hook in self.hooks:
                await hook.on_replayed(info, exc)
            raise
        for hook in self.hooks:
            await hook.on_replayed(info, None)
        return value

    def _announce(self, step: _Step, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Tell hooks and listeners a live call starts (CallStarted)."""
        info = step.info = CallInfo(
            self.run_id, step.key, step.pol.name, args_for_record(args, kwargs)
        )
        if self.listeners:
            self.publish(CallStarted(self.run_id, step.key, step.pol.name, info.arguments))

    def _record_of(self, step: _Step, output: str | None, error: str | None) -> StoredStep:
        return StoredStep(
            key=step.key,
            name=step.pol.name,
            args_hash=step.args_hash,
            args=step.args_json,
            output=output,
            error=error,
            attempts=step.n,
            started_at=step.started,
            finished_at=time.time(),
        )

    async def _failure(self, step: _Step, caught: BaseException) -> Any:
        """Record a step's failure (S4) and raise what a replay will raise.

        Returns a value only when another executor recorded success first (S3).
        """
        err: BaseException = as_exception(caught)
        if step.recorded:
            rec = self._record_of(step, None, error_to_json(err))
            won = await self.record_step(rec)
            self.args_log.commit(step.key)
            if won is not rec and (
                won.args_hash != step.args_hash or won.name != step.pol.name
            ):  # another executor recorded another call first: nondeterminism (S5)
                self.replayed_value(
                    await self._readable(won),
                    step.key,
                    step.pol.name,
                    step.args_json,
                    step.args_hash,
                    full=step.full,
                )
            if won.output is not None:  # another executor recorded success first (S3)
                return self.decode_output(won, step.key)
            # What a replay will raise is what the caller sees now (S2, S4):
            # the winner's error, or ours as the ledger rebuilds it.
            try:
                recorded = error_from_json(
                    won.error or "", f"error of step {step.key} of run {self.run_id!r}"
                )
            except CorruptedRecord as bad:  # a rival's record we cannot read halts the run
                raise self.halt(bad) from None
            if won is not rec or type(recorded) is not type(err):
                if won is rec:
                    warn_rebuilt(type(err), type(recorded))
                err = recorded
        await self._failed(step.info, step.key, step.pol.name, err)
        if err is caught:
            raise caught
        raise err from caught

    async def _finished(self, step: _Step, result: Any) -> None:
        if step.info is None:
            return
        for hook in self.hooks:
            await hook.after_call(step.info, result)
        if self.listeners:
            elapsed = time.time() - step.started
            self.publish(CallFinished(self.run_id, step.key, step.pol.name, result, elapsed))

    async def _attempts(
        self,
        key: str,
        pol: Policy[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        attempts: _Step,
    ) -> Any:
        """Call the policy until it succeeds or its retries are spent."""
        while True:
            attempts.n += 1
            attempt_key = key if attempts.n == 1 else f"{key}@{attempts.n}"
            ctx = (pol.ctx_class or Context)(self, attempt_key)
            token = current_step.set(ctx)
            try:
                if pol.timeout is None:
                    return await pol.invoke(ctx, args, kwargs)
                deadline = asyncio.timeout(pol.timeout)
                try:
                    async with deadline:
                        return await pol.invoke(ctx, args, kwargs)
                except TimeoutError:
                    if not deadline.expired():
                        raise  # the policy's own TimeoutError
                    raise TimeoutError(
                        f"{pol.name} took longer than its timeout of {pol.timeout} s"
                    ) from None
            except pol.retry_on as exc:
                if (
                    attempts.n > pol.retries
                    or isinstance(exc, (*NOT_STEP_ERRORS, Veto))
                    or not isinstance(exc, Exception)
                ):
                    raise
                delay = min(pol.backoff * 2 ** (attempts.n - 1), pol.max_backoff)
                await self._retrying(attempts, exc, delay)
                if delay > 0:
                    await asyncio.sleep(delay)
            finally:
                current_step.reset(token)

    async def _retrying(self, step: _Step, exc: BaseException, delay: float) -> None:
        """Say a call is retried: a warning in the log, and hooks told."""
        _log.warning(
            "run %r step %s (%s): attempt %d failed with %s: %s; retrying in %.2f s",
            self.run_id,
            step.key,
            step.pol.name,
            step.n,
            type(exc).__name__,
            exc,
            delay,
            extra={
                "event": "step.retry",
                "run_id": self.run_id,
                "step": step.key,
                "policy": step.pol.name,
                "attempt": step.n + 1,
                "error_type": type(exc).__name__,
                "delay": delay,
            },
        )
        if step.info is not None:
            for hook in self.hooks:
                await hook.on_retry(step.info, step.n + 1, exc)

    async def _failed(self, info: CallInfo | None, key: str, name: str, err: BaseException) -> None:
        if info is None:
            return
        for hook in self.hooks:
            await hook.on_error(info, err)
        if self.listeners:
            self.publish(CallFailed(self.run_id, key, name, type(err).__name__, str(err)))

    # -- units of work: the journaling API (docs/journaling.md) ----------------
    def context(self, key: str) -> Context:
        """A context of this run for the unit of work at ``key``.

        Child steps of code running under it (``with use_context(ctx)``, or
        ``ctx.next_key()`` for a layer's own units) are keyed below ``key``
        (S1). The one way to make a context: a layer above the core never
        builds one by hand.
        """
        return Context(self, key)

    def run_unit(
        self,
        key: str,
        name: str,
        work: Callable[[Context], Awaitable[T]],
        args: dict[str, Any] | None = None,
        started: float | None = None,
    ) -> Coroutine[Any, Any, T]:
        """Run ``work`` as the step ``key`` named ``name``, durably.

        The contract of a policy's step, for a layer's own unit of work (a
        flow node's ``exec``, a journey's transition): recorded, its
        ``args`` (JSON) and ``name`` are checked on replay (S5), its result
        returned or its error raised again on replay without running
        ``work`` (S2, S4), the first recorded outcome wins (S3). ``work`` is
        called with the unit's context, so what it awaits is keyed below
        ``key``; it runs once per execution, with no retry or timeout of the
        engine's. Take ``key`` with :meth:`Context.next_key`. ``started``
        (``time.time()``): when the work began, for work done before this
        call (a sync flow node's ``exec``, recorded afterwards); else now.
        """
        if self.halted is not None:
            raise Halt(self.halted)
        return self._full(key, Unit(name, work), (), args or {}, started=started)

    def replayed_unit(self, key: str, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """The recorded outcome of the unit at ``key``, for code that cannot
        await (a sync flow node on a worker thread): ``(False, None)`` when it
        has none, so the caller runs it live; else ``(True, value)``, or its
        recorded error raised, after the same identity check as
        :meth:`run_unit` (S5). Safe from any thread: it touches no store."""
        rec = self.replay.get(key)
        if rec is None:
            return False, None
        args_json = identity_json((), args, key, self.run_id)
        return True, self.replayed_value(
            rec, key, name, args_json, step_hash(args_json), publish=False
        )

    # -- the root ------------------------------------------------------------
    async def run_root(
        self, pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run the run's root policy (key ``""``, never recorded as a step)."""
        if kwargs and OPTIONS in kwargs:
            return await self._offering("", pol, args, kwargs, root=True)
        if self.plain and pol.simple:
            return await self._plain((pol.ctx_class or Context)(self, ""), pol, args, kwargs)
        return await self._full("", pol, args, kwargs, root=True)


def run_detached(
    pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Coroutine[Any, Any, Any]:
    """A policy awaited outside any run: run it alone, in memory."""
    return Engine(uuid.uuid4().hex).run_root(pol, args, kwargs)


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


on_detached_call(run_detached)
