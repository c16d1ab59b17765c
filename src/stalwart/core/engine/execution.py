"""The engine: executes steps, replays recorded ones, dispatches action calls.

One engine serves every store. In memory (``store is None``) nothing is
recorded and a call with no hook, listener, retry or timeout takes a fast path
that costs little more than the ``await`` itself. With a store, each call is
looked up in the replay map loaded when the run resumed (S2): a recorded call
returns its result (or raises its error, S4) without executing, after its
identity is checked (S5); an unrecorded call executes live and its outcome is
recorded under its key before the caller sees it (S3, S11).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from .. import codec
from ..context import Context
from ..errors import CorruptedRecord, StoreError, Veto
from ..events import CallFailed, CallFinished, CallInfo, CallStarted
from ..ledger import StoredStep
from ..policy import Policy, as_policy, current_step, on_detached_call
from ..recorded import error_from_json, error_to_json, warn_rebuilt
from ..stepargs import full_args, is_compact
from .control import NOT_STEP_ERRORS, Halt, as_exception, is_step_failure
from .dispatch import Dispatch
from .identity import OPTIONS, args_for_record, identity_json, step_hash
from .mailbox import Mailbox
from .waits import Waits

__all__ = ["Execution", "Unit", "run_detached"]

T = TypeVar("T")

#: Retries are logged here (a warning each): a step that keeps failing is the
#: first thing an operator looks for.
_log = logging.getLogger("stalwart.engine")


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
    :meth:`Execution.run_unit`: recorded, one attempt, no timeout (the work
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


class Execution(Dispatch, Waits, Mailbox):
    """One run being executed in this process: steps, replay, recording."""

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
        kwargs = self.offered(kwargs)  # options named or given as specs: their policies
        if self.plain and pol.simple:
            result = await self._plain((pol.ctx_class or Context)(self, key), pol, args, kwargs)
        else:
            result = await self._full(key, pol, args, kwargs, root)
        return await self.dispatch(key, result, kwargs[OPTIONS], pol)

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
            # Journal.record_step, inlined: one coroutine less on every step.
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
            recorded = error_from_json(
                won.error or "", f"error of step {step.key} of run {self.run_id!r}"
            )
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
    return Execution(uuid.uuid4().hex).run_root(pol, args, kwargs)


on_detached_call(run_detached)
