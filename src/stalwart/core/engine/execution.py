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
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from .. import codec
from ..context import Context
from ..errors import StoreError, Veto
from ..events import CallFailed, CallFinished, CallInfo, CallStarted
from ..ledger import StepRecord
from ..policy import Policy, _current, as_policy, on_detached_call
from ..recorded import error_from_json, error_to_json, warn_rebuilt
from .control import NOT_STEP_ERRORS, Halt, as_exception, is_step_failure
from .dispatch import Dispatch
from .identity import args_for_record, identity_json, step_hash
from .waits import Waits

__all__ = ["Execution", "run_detached"]


class _Step:
    """One live call: its identity as recorded, its attempts and start time."""

    __slots__ = ("args_hash", "args_json", "info", "key", "n", "pol", "recorded", "started")

    def __init__(self, key: str, pol: Policy[Any, Any], *, recorded: bool) -> None:
        self.key = key
        self.pol = pol
        self.recorded = recorded  # written to the ledger (a store, a recorded policy, not the root)
        self.args_json = self.args_hash = ""
        self.info: CallInfo | None = None
        self.n = 0  # attempts so far
        self.started = time.time()


class Execution(Dispatch, Waits):
    """One run being executed in this process: steps, replay, recording."""

    # -- steps -------------------------------------------------------------
    def step(
        self, key: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Coroutine[Any, Any, Any]:
        if self.halted is not None:
            raise Halt(self.halted)
        pol = target if type(target) is Policy else as_policy(target)
        if self.plain and pol.simple:
            return self._plain(key, pol, args, kwargs)
        return self._full(key, pol, args, kwargs)

    async def _plain(
        self, key: str, pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        ctx = (pol.ctx_class or Context)(self, key)
        token = _current.set(ctx)
        try:
            if pol.takes_ctx:
                result = await pol.fn(ctx, *args, **kwargs)
            else:
                result = await pol.fn(*args, **kwargs)
        except BaseException as caught:
            if isinstance(caught, Exception) or not is_step_failure(caught):
                raise
            raise as_exception(caught) from caught
        finally:
            _current.reset(token)
        if kwargs and "options" in kwargs:
            return await self.dispatch(key, result, kwargs["options"], pol)
        return result

    async def _full(
        self,
        key: str,
        pol: Policy[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        root: bool = False,
    ) -> Any:
        """One step, in the contract's order: replay if recorded (S2, S5),
        else execute (retries, timeout), record the outcome (S3, S4, S11),
        and only then let the caller see it."""
        # This is the hot path of every durable step: each extra coroutine
        # here costs B2 a few per cent, hence the inlined checks below.
        step = _Step(key, pol, recorded=self.store is not None and pol.record and not root)
        if step.recorded:
            if "_declared" not in pol.__dict__:
                pol.declare_types()
            step.args_json = identity_json(args, kwargs, key)
            step.args_hash = step_hash(step.args_json)
            rec = self.replay.get(key)
            if rec is not None:
                result = self.replayed_value(rec, key, pol.name, step.args_json, step.args_hash)
                if kwargs and "options" in kwargs:
                    return await self.dispatch(key, result, kwargs["options"], pol)
                return result
        if self.hooks or self.listeners:
            step.info = CallInfo(self.run_id, key, pol.name, args_for_record(args, kwargs))
            if self.listeners:
                self.publish(CallStarted(self.run_id, key, pol.name, step.info.arguments))
        try:
            for hook in self.hooks:
                await hook.before_call(step.info)  # type: ignore[arg-type]
            if pol.simple:  # one attempt, no timeout: no retry loop to enter
                step.n = 1
                ctx = (pol.ctx_class or Context)(self, key)
                token = _current.set(ctx)
                try:
                    result = await pol.invoke(ctx, args, kwargs)
                finally:
                    _current.reset(token)
            else:
                result = await self._attempts(key, pol, args, kwargs, step)
            output = None
            if step.recorded:
                output = codec.dumps(result, f"result of step {key} ({pol.name})")
        except BaseException as caught:
            if not is_step_failure(caught):
                raise
            result = await self._failure(step, caught)
        else:
            if step.recorded:
                # self.record_step(), inlined (one coroutine less per step).
                rec = StepRecord(
                    key, pol.name, step.args_hash, step.args_json, output, None,
                    step.n, step.started, time.time(),
                )  # fmt: skip
                if self.halted is not None:
                    raise Halt(self.halted)
                try:
                    won = await self.store.record_step(self.run_id, self.fence, rec)  # type: ignore[union-attr]
                except StoreError as exc:
                    raise self.halt(exc) from exc
                self.live_steps += 1
                if won is not rec:  # the first recorded result wins for every reader (S3)
                    result = self.replayed_value(won, key, pol.name, step.args_json, step.args_hash)
            if step.info is not None:
                await self._finished(step, result)
        if kwargs and "options" in kwargs:  # the reply's action calls run now (or replay)
            return await self.dispatch(key, result, kwargs["options"], pol)
        return result

    def _record_of(self, step: _Step, output: str | None, error: str | None) -> StepRecord:
        return StepRecord(
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
            token = _current.set(ctx)
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
                if delay > 0:
                    await asyncio.sleep(delay)
            finally:
                _current.reset(token)

    async def _failed(self, info: CallInfo | None, key: str, name: str, err: BaseException) -> None:
        if info is None:
            return
        for hook in self.hooks:
            await hook.on_error(info, err)
        if self.listeners:
            self.publish(CallFailed(self.run_id, key, name, type(err).__name__, str(err)))

    # -- the root ------------------------------------------------------------
    async def run_root(
        self, pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self.plain and pol.simple:
            return await self._plain("", pol, args, kwargs)
        return await self._full("", pol, args, kwargs, root=True)


def run_detached(
    pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Coroutine[Any, Any, Any]:
    """A policy awaited outside any run: run it alone, in memory."""
    return Execution(uuid.uuid4().hex).run_root(pol, args, kwargs)


on_detached_call(run_detached)
