"""The runtime: executes steps, replays recorded ones, dispatches action calls.

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
import builtins
import contextlib
import hashlib
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from .. import codec, errors
from ..context import Context
from ..declared import lookup
from ..errors import (
    CancelledRun,
    CorruptedRecord,
    DuplicatePolicy,
    NonDeterminismError,
    SerializationError,
    StaleLeaseError,
    StalwartError,
    StepError,
    StoreError,
    StoreUnavailable,
    Veto,
)
from ..events import CallFailed, CallFinished, CallInfo, CallStarted, Emitted, Hook, TextDelta
from ..ledger import CHILDREN_WAIT, TERMINAL, Ledger, StepRecord, child_group, child_run_id
from ..message import Message
from ..policy import Policy, _current, as_policy, same_policy, where_defined
from ..schema import ArgumentError

T = TypeVar("T")
_log = logging.getLogger("stalwart.runtime")

__all__ = [
    "Execution",
    "Halt",
    "Suspend",
    "as_exception",
    "error_from_json",
    "error_to_json",
    "find_halt",
    "leaves_of",
    "recorded_outcome",
]

# Errors about the run itself, not the step: never recorded as a step's error,
# so that fixing the cause (code, store) lets the run resume. The runtime
# raises them inside a Halt; these types are also refused as a step's error
# in case one escapes without. A StoreError a step's own code raises (it
# talks to some store) is that step's error like any other.
_NOT_STEP_ERRORS = (NonDeterminismError, CorruptedRecord, StaleLeaseError)


_WARNED: set[type] = set()


def _warn_rebuilt(original: type, rebuilt: type) -> None:
    """Say once per class that its errors are raised as another type."""
    if original in _WARNED or issubclass(original, StepError):
        return
    _WARNED.add(original)
    _log.warning(
        "%s is not declared, so a step's %s is raised as %s, live as on replay; "
        "declare it with stalwart.register_type(%s) to raise it as itself",
        _type_name(original),
        original.__name__,
        rebuilt.__name__,
        original.__name__,
    )


class _Attempts:
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


def _is_step_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the step's own failure, to be recorded (S4, S14).

    Everything a step's code raises is, ``BaseException``s included (a tool's
    ``SystemExit`` from argparse, its own ``CancelledError`` or
    ``GeneratorExit``): recorded once, they can neither kill the process nor
    make the runner retry the run for ever. Not the step's: the run being
    cancelled (the task is cancelling), a durable wait unwinding the run, a
    halted execution, Ctrl-C, and the errors about the run itself
    (:data:`_NOT_STEP_ERRORS`).
    """
    if isinstance(exc, Exception):
        if isinstance(exc, BaseExceptionGroup):
            return all(_is_step_failure(e) for e in leaves_of(exc))
        return not isinstance(exc, _NOT_STEP_ERRORS)
    if isinstance(exc, Suspend | Halt | KeyboardInterrupt):
        return False
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is None or task.cancelling() == 0
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_step_failure(e) for e in leaves_of(exc))
    return True


def as_exception(exc: BaseException) -> Exception:
    """A step failure as an ``Exception``: what callers see, live and on replay."""
    if isinstance(exc, Exception):
        return exc
    name = type(exc).__name__
    return StepError(name, str(exc) or f"{name} raised by the step")


class Suspend(BaseException):
    """Unwinds a run that waits (durable sleep or signal); not an error.

    A BaseException so that a policy's ``except Exception`` cannot swallow it.
    """

    def __init__(self, wake_at: float | None, waiting_for: str | None) -> None:
        super().__init__(wake_at, waiting_for)
        self.wake_at = wake_at
        self.waiting_for = waiting_for


class Halt(BaseException):
    """Stops an execution whose ledger refused a write, or whose replay
    diverged: the run, not the step, has the problem (S6, S8, S14).

    A BaseException, raised again by every later step of the execution, so
    that a policy's ``except Exception`` cannot swallow it and go on
    executing steps whose records could leave a hole or that another worker
    now owns. The runner settles the run from :attr:`cause`.
    """

    def __init__(self, cause: StalwartError) -> None:
        super().__init__(cause)
        self.cause = cause


def find_halt(exc: BaseException) -> Halt | None:
    """The Halt that unwound a run, itself or inside a (nested) group."""
    leaves = leaves_of(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return next((e for e in leaves if isinstance(e, Halt)), None)


def error_to_json(exc: BaseException) -> str:
    """A failure as recorded: its type's name, its message, and its args and
    attributes when they are plain JSON (no codec tags), so that reading an
    error back never constructs anything but the exception itself."""
    cls = type(exc)
    if isinstance(exc, StepError):
        data: dict[str, Any] = {"type": exc.error_type, "message": exc.error_message}
    else:
        data = {"type": _type_name(cls), "message": str(exc)}
        bases = [_type_name(c) for c in cls.__mro__[1:] if issubclass(c, Exception)]
        if bases[:-1]:  # the classes between it and Exception, nearest first
            data["bases"] = bases[:-1][:8]
        if _is_plain(list(exc.args)):
            data["args"] = list(exc.args)
        attrs = {
            k: v
            for k, v in getattr(exc, "__dict__", {}).items()
            if k.isidentifier() and not k.startswith("_") and _is_plain(v)
        }
        if isinstance(exc, OSError):  # kept in C slots, not __dict__
            attrs.update({k: v for k in ("filename", "filename2") if (v := getattr(exc, k))})
        if attrs:
            data["attrs"] = attrs
    return json.dumps(data, separators=(",", ":"))


# The name Stalwart's own errors carry in a ledger: stable data, independent
# of the module that defines them (rows written before core/ existed say so).
ERRORS_WIRE_MODULE = "stalwart.errors"


def _type_name(cls: type) -> str:
    module = ERRORS_WIRE_MODULE if cls.__module__ == errors.__name__ else cls.__module__
    return f"{module}.{cls.__qualname__}"


def _is_plain(value: Any, depth: int = 0) -> bool:
    """Plain JSON data: no codec tags needed, nothing to construct."""
    if type(value) in _SCALARS:
        return not (type(value) is float and value - value != 0.0)
    if depth > 20:
        return False
    if type(value) is list:
        return all(_is_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def recorded_outcome(run_id: str, status: str, result: str | None, error: str | None) -> Any:
    """A finished run's value, or its recorded error raised (S10)."""
    if status == "succeeded":
        return codec.loads(result or "null", f"result of run {run_id!r}")
    if status == "cancelled":
        raise CancelledRun(f"run {run_id!r} was cancelled")
    raise error_from_json(
        error or '{"type":"Error","message":"failed"}', f"error of run {run_id!r}"
    )


def error_from_json(text: str, where: str = "recorded error") -> Exception:
    """Rebuild a recorded error without importing anything (S13).

    The original class comes back, with its recorded args and attributes,
    when it is a builtin exception, one of Stalwart's own that a step may
    raise, or a class the program declared; anything else is a
    :class:`StepError` carrying the recorded type name and message. Never a
    runtime control error (a store or nondeterminism error), which an edited
    row could otherwise use to make every worker retry the run for ever.
    """
    try:
        data = json.loads(text)
        type_name = data["type"]
        message = data["message"]
        args = data.get("args")
        attrs = data.get("attrs", {})
        bases = data.get("bases", [])
        if not isinstance(type_name, str) or not isinstance(message, str):
            raise TypeError("type and message must be strings")
        if not (isinstance(bases, list) and all(isinstance(b, str) for b in bases)):
            raise TypeError("bases must be a list of type names")
        if args is not None and not (isinstance(args, list) and _is_plain(args)):
            raise TypeError("args must be a list of plain values")
        if not (isinstance(attrs, dict) and _is_plain(attrs)):
            raise TypeError("attrs must be an object of plain values")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise CorruptedRecord(
            f"{where}: the recorded error cannot be read back ({type(exc).__name__}: {exc})"
        ) from None
    # The class itself if known, else its nearest known base (a
    # json.JSONDecodeError the program never declared is still a ValueError).
    for name in (type_name, *bases[:8]):
        cls = _known_exception(name)
        if cls is None:
            continue
        with contextlib.suppress(Exception):
            exc_obj = _rebuild(cls, tuple(args) if args is not None else (message,), attrs)
            if str(exc_obj) == message or isinstance(exc_obj, StalwartError):
                return exc_obj
    return StepError(type_name.rpartition(".")[2] or type_name, message)


def _rebuild(cls: type[Exception], args: tuple[Any, ...], attrs: dict[str, Any]) -> Exception:
    if cls.__module__ == "builtins":
        exc = cls(*args)  # builtins set their C fields (errno, filename...) from args
    else:
        exc = cls.__new__(cls)  # the program's class: its __init__ is not replayed
        exc.args = args
    for name, value in attrs.items():
        if name.isidentifier() and not name.startswith("_"):
            setattr(exc, name, value)
    return exc


# Never rebuilt from a row: they would tell a runner to retry the run (so an
# edited row could make every worker spin), or need their own constructor.
_CONTROL = (StoreUnavailable, StaleLeaseError, StepError)


def _known_exception(type_name: str) -> type[Exception] | None:
    """The exception class a recorded type name stands for, if the program knows it."""
    module, _, qual = type_name.rpartition(".")
    cls: Any
    if module == "builtins":
        cls = getattr(builtins, qual, None)
    elif module == ERRORS_WIRE_MODULE:
        cls = getattr(errors, qual, None) if qual in errors.__all__ else None
    else:
        cls = lookup(f"{module}:{qual}")
        if cls is None and "." in module:  # a nested class: Outer.Inner
            head, _, outer = module.rpartition(".")
            cls = lookup(f"{head}:{outer}.{qual}")
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, _CONTROL):
        return cls
    return None


def _args_for_record(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Arguments as recorded: offered options by name, since policies are code."""

    def tidy(v: Any) -> Any:
        if isinstance(v, Policy):
            return f"<policy {v.name}>"
        if isinstance(v, list | tuple) and v and all(_is_option(x) for x in v):
            return [f"<policy {as_policy(x).name}>" for x in v]
        return v

    out: dict[str, Any] = {}
    if args:
        out["*"] = [tidy(a) for a in args]
    for k, v in kwargs.items():
        if k == "options" and isinstance(v, list | tuple):
            option_policies(v)  # a clear error for anything that is not an option
            out[k] = [f"<policy {as_policy(x).name}>" for x in v]
        else:
            out[k] = tidy(v)
    return out


def option_policies(options: Any) -> list[Policy[Any, Any]]:
    """The policies offered as options; a TypeError naming any that is not one."""
    out: dict[str, Policy[Any, Any]] = {}
    for i, opt in enumerate(options or ()):
        if not _is_option(opt):
            raise TypeError(
                f"options[{i}] is {opt!r} ({type(opt).__name__}), which is not a policy; "
                "offer policies or async functions"
            )
        pol = as_policy(opt)
        other = out.setdefault(pol.name, pol)
        if other is not pol and not same_policy(other, pol):
            raise DuplicatePolicy(
                f"two different options are named {pol.name!r}: {where_defined(other)} and "
                f"{where_defined(pol)}; a model could not tell them apart"
            )
    return list(out.values())


def _identity_json(args: tuple[Any, ...], kwargs: dict[str, Any], key: str) -> str:
    """The arguments as recorded and compared on replay (S5).

    Message ids are left out: they are random per execution, so a history
    rebuilt on replay (``Message.user(question)`` inside a policy) would never
    match its record otherwise. What a message says is compared; its id is not.
    """
    if all(type(v) in _SCALARS for v in args) and all(
        type(v) in _SCALARS for v in kwargs.values()
    ):  # the common case: plain arguments give the same bytes without the tree walk
        out: dict[str, Any] = {"*": list(args)} if args else {}
        out.update(kwargs)
        try:
            return json.dumps(out, separators=(",", ":"), allow_nan=False)
        except ValueError as exc:
            raise SerializationError(f"arguments of step {key}: {exc}") from exc
    where = f"arguments of step {key}"
    tree = _strip_ids(codec.encode(_args_for_record(args, kwargs), where))
    try:
        return json.dumps(tree, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise SerializationError(f"{where}: {exc}") from exc


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _strip_ids(tree: Any) -> Any:
    if isinstance(tree, list):
        return [_strip_ids(v) for v in tree]
    if isinstance(tree, dict):
        if tree.get("$t") == "msg":
            inner = {k: _strip_ids(v) for k, v in tree["v"].items() if k != "id"}
            return {"$t": "msg", "v": inner}
        return {k: _strip_ids(v) for k, v in tree.items()}
    return tree


def _is_option(x: Any) -> bool:
    return isinstance(x, Policy) or (callable(x) and not isinstance(x, type | Message))


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class Host(Protocol):
    """What an execution needs from its runner to start and await child runs."""

    async def spawn_children(
        self,
        parent: Execution,
        pol: Policy[Any, Any],
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        ids: list[str],
        queue: str | None,
        priority: int,
    ) -> None: ...

    async def await_memory_children(self, ids: list[str]) -> list[dict[str, Any]]: ...


class Execution:
    """The state of one run being executed in this process."""

    def __init__(
        self,
        run_id: str,
        *,
        store: Ledger | None = None,
        fence: int = 0,
        replay: dict[str, StepRecord] | None = None,
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
        self._refresh()

    def _refresh(self) -> None:
        self.plain = self.store is None and not self.hooks and not self.listeners

    def listen(self, queue: asyncio.Queue[Any]) -> None:
        self._loop = asyncio.get_running_loop()
        self.listeners.append(queue)
        self._refresh()

    def unlisten(self, queue: asyncio.Queue[Any]) -> None:
        if queue in self.listeners:
            self.listeners.remove(queue)
        self._refresh()

    def _publish(self, event: Any) -> None:
        if self._loop is not None and not _in_loop(self._loop):
            # emit() from a sync policy's worker thread: hand over to the loop.
            self._loop.call_soon_threadsafe(self._publish, event)
            return
        for q in self.listeners:
            q.put_nowait(event)

    def emit(self, key: str, value: Any, *, replayed: bool = False, marked: bool = False) -> None:
        """Deliver ``value`` to listeners, unless it is a ``replayed`` emit.

        ``marked``: the value says itself whether it is a replay (a flow's
        node events do), so it is delivered either way.
        """
        if self.listeners and (marked or not replayed):
            self._publish(Emitted(self.run_id, key, value))

    def text_delta(self, key: str, text: str) -> None:
        if self.listeners:  # only a live call streams text: a replayed one has its result
            self._publish(TextDelta(self.run_id, key, text))

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
            if isinstance(caught, Exception) or not _is_step_failure(caught):
                raise
            raise as_exception(caught) from caught
        finally:
            _current.reset(token)
        if kwargs and "options" in kwargs:
            return await self._dispatch(key, result, kwargs["options"], pol)
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
        store = self.store if (pol.record and not root) else None
        args_json = args_hash = ""
        if store is not None:
            pol.declare_types()
            args_json = _identity_json(args, kwargs, key)
            args_hash = _hash(args_json)
            rec = self.replay.get(key)
            if rec is not None:
                result = self._replayed(rec, key, pol.name, args_json, args_hash)
                return await self._then_dispatch(key, result, kwargs, pol)
        info = None
        if self.hooks or self.listeners:
            info = CallInfo(self.run_id, key, pol.name, _args_for_record(args, kwargs))
            if self.listeners:
                self._publish(CallStarted(self.run_id, key, pol.name, info.arguments))
        started = time.time()
        attempts = _Attempts()
        try:
            for hook in self.hooks:
                await hook.before_call(info)  # type: ignore[arg-type]
            result = await self._attempts(key, pol, args, kwargs, attempts)
            output = codec.dumps(result, f"result of step {key} ({pol.name})") if store else None
        except BaseException as caught:
            if not _is_step_failure(caught):
                raise
            err: BaseException = as_exception(caught)
            if store is not None:
                rec = StepRecord(
                    key, pol.name, args_hash, args_json, None, error_to_json(err),
                    attempts.n, started, time.time(),
                )  # fmt: skip
                won = await self._record(rec)
                if won.output is not None:  # another executor recorded success first (S3)
                    result = self._decode_output(won, key)
                    return await self._then_dispatch(key, result, kwargs, pol)
                # What a replay will raise is what the caller sees now (S2, S4):
                # the winner's error, or ours as the ledger rebuilds it.
                recorded = error_from_json(
                    won.error or "", f"error of step {key} of run {self.run_id!r}"
                )
                if won is not rec or type(recorded) is not type(err):
                    if won is rec:
                        _warn_rebuilt(type(err), type(recorded))
                    err = recorded
            await self._failed(info, key, pol.name, err)
            if err is caught:
                raise
            raise err from caught
        if store is not None:
            rec = StepRecord(
                key, pol.name, args_hash, args_json, output, None,
                attempts.n, started, time.time(),
            )  # fmt: skip
            won = await self._record(rec)
            if won is not rec:  # S3: the first recorded result wins for every reader
                result = self._replayed(won, key, pol.name, args_json, args_hash)
        if info is not None:
            for hook in self.hooks:
                await hook.after_call(info, result)
            if self.listeners:
                self._publish(
                    CallFinished(self.run_id, key, pol.name, result, time.time() - started)
                )
        return await self._then_dispatch(key, result, kwargs, pol)

    async def _attempts(
        self,
        key: str,
        pol: Policy[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        attempts: _Attempts,
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
                    or isinstance(exc, (*_NOT_STEP_ERRORS, Veto))
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
            self._publish(CallFailed(self.run_id, key, name, type(err).__name__, str(err)))

    async def _then_dispatch(
        self, key: str, result: Any, kwargs: dict[str, Any], pol: Policy[Any, Any]
    ) -> Any:
        """A step called with ``options`` has its action calls executed (live or replayed)."""
        if kwargs and "options" in kwargs:
            return await self._dispatch(key, result, kwargs["options"], pol)
        return result

    async def _record(self, rec: StepRecord) -> StepRecord:
        assert self.store is not None
        won = await self._ledger(self.store.record_step(self.run_id, self.fence, rec))
        self.live_steps += 1
        return won

    async def _ledger(self, write: Awaitable[T]) -> T:
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
        """Stop this execution for good: every later step raises the same."""
        if self.halted is None:
            self.halted = cause
        return Halt(self.halted)

    def _replayed(
        self,
        rec: StepRecord,
        key: str,
        name: str,
        args_json: str,
        args_hash: str,
        publish: bool = True,
    ) -> Any:
        if rec.name != name or rec.args_hash != args_hash:
            raise self.halt(NonDeterminismError(
                f"step {key} of run {self.run_id} does not match its record:\n"
                f"  recorded: {rec.name}({rec.args})\n"
                f"  now:      {name}({args_json})\n"
                "The policy's code changed, or it is not deterministic; "
                "guard changed code with `await ctx.patched(...)`."
            ))
        self.replayed_steps += 1
        if rec.error is not None:
            try:
                exc = error_from_json(rec.error, f"error of step {key} of run {self.run_id!r}")
            except CorruptedRecord as bad:
                raise self.halt(bad) from None
            if self.listeners and publish:
                self._publish(
                    CallFailed(self.run_id, key, name, type(exc).__name__, str(exc), True)
                )
            raise exc
        value = self._decode_output(rec, key)
        if self.listeners and publish:
            self._publish(CallFinished(self.run_id, key, name, value, 0.0, True))
        return value

    def _decode_output(self, rec: StepRecord, key: str) -> Any:
        where = f"step {key} of run {self.run_id!r}: the recorded output cannot be read back"
        try:
            return codec.loads(rec.output or "null", where)
        except CorruptedRecord as bad:
            raise self.halt(bad) from None

    # -- options dispatch ------------------------------------------------------
    async def _dispatch(self, key: str, result: Any, options: Any, pol: Policy[Any, Any]) -> Any:
        # With options, a reply is always a list of messages (``history +=``).
        if isinstance(result, Message):
            messages = [result]
        elif isinstance(result, list) and result and all(isinstance(m, Message) for m in result):
            messages = result
        else:
            return result
        calls = [m.action_call for m in messages if m.action_call is not None]
        if not calls:
            return messages
        allowed = {p.name: p for p in option_policies(options)}
        limit = pol.max_parallel or self.max_parallel
        keys = [f"{key}#{i}" for i in range(1, len(calls) + 1)]  # S1: in call order, now
        if len(calls) == 1:
            results = [await self._action(keys[0], allowed, calls[0])]
            return [*messages, *results]
        sem = asyncio.Semaphore(limit) if limit else None
        tasks: list[asyncio.Task[Message]] = []
        try:
            async with asyncio.TaskGroup() as tg:
                for k, call in zip(keys, calls, strict=True):
                    tasks.append(tg.create_task(self._limited(sem, k, allowed, call)))
        except BaseExceptionGroup as group:
            # A store failure or nondeterminism in one call is the run's
            # problem, not a result: surface it as itself, not as a group.
            for exc in leaves_of(group):
                if isinstance(exc, Halt | _NOT_STEP_ERRORS):
                    raise exc from group
            raise
        results = [t.result() for t in tasks]
        return [*messages, *results]

    async def _limited(
        self,
        sem: asyncio.Semaphore | None,
        key: str,
        allowed: dict[str, Policy[Any, Any]],
        call: Any,
    ) -> Message:
        if sem is None:
            return await self._action(key, allowed, call)
        async with sem:
            return await self._action(key, allowed, call)

    async def _action(self, key: str, allowed: dict[str, Policy[Any, Any]], call: Any) -> Message:
        name = call.name
        if call.invalid is not None:
            return Message.result(
                call,
                error_type="InvalidArguments",
                error_message=f"arguments for {name!r} are not valid JSON: {call.invalid}",
            )
        pol = allowed.get(name)
        if pol is None:
            names = ", ".join(sorted(allowed)) or "(none)"
            return Message.result(
                call,
                error_type="UnknownOption",
                error_message=f"{name!r} is not an allowed option; allowed options: {names}",
            )
        try:
            kwargs = pol.validate(call.arguments)
        except ArgumentError as exc:
            return Message.result(call, error_type="InvalidArguments", error_message=str(exc))
        try:
            value = await self.step(key, pol, (), kwargs)
        except _NOT_STEP_ERRORS:
            raise
        except Exception as exc:
            err_type = exc.error_type if isinstance(exc, StepError) else type(exc).__name__
            msg = exc.error_message if isinstance(exc, StepError) else str(exc)
            return Message.result(call, error_type=err_type, error_message=msg)
        try:
            codec.encode(value, f"result of {name!r}")
        except SerializationError as exc:
            return Message.result(call, error_type="SerializationError", error_message=str(exc))
        return Message.result(call, value, actor=pol.name)

    # -- recorded values, sleep, signals -----------------------------------
    async def recorded(self, key: str, kind: str, make: Callable[[], Any]) -> Any:
        if self.store is None:
            return make()
        rec = self.replay.get(key)
        if rec is not None:
            return self._replayed(rec, key, f"stalwart.{kind}", "{}", "", publish=False)
        value = make()
        await self._record_value(key, kind, value)
        return value

    async def _record_value(
        self, key: str, kind: str, value: Any, error: str | None = None
    ) -> None:
        assert self.store is not None
        now = time.time()
        rec = StepRecord(
            key,
            f"stalwart.{kind}",
            "",
            None,
            None if error else codec.dumps(value, f"step {key}"),
            error,
            1,
            now,
            now,
            kind,
        )
        await self._ledger(self.store.record_step(self.run_id, self.fence, rec))
        self.live_steps += 1

    async def sleep(self, key: str, seconds: float) -> None:
        if self.store is None:
            await asyncio.sleep(seconds)
            return
        wake_at = await self.recorded(key, "sleep", lambda: time.time() + seconds)
        remaining = wake_at - time.time()
        if remaining <= 0:
            return
        if remaining <= self.inline_sleep:
            await asyncio.sleep(remaining)
            return
        raise Suspend(wake_at, None)

    async def wait_for(self, deadline_key: str, key: str, name: str, timeout: float | None) -> Any:
        if self.store is None:
            return await self._wait_in_memory(name, timeout)
        deadline = await self.recorded(
            deadline_key, "deadline", lambda: None if timeout is None else time.time() + timeout
        )
        rec = self.replay.get(key)
        if rec is not None:
            return self._replayed(rec, key, f"stalwart.signal:{name}", "{}", "", publish=False)
        payload = await self._ledger(self.store.take_signal(self.run_id, name, key))
        if payload is not None:
            value = codec.loads(payload, f"signal {name!r} of run {self.run_id!r}")
            await self._record_value(key, f"signal:{name}", value)
            return value
        if deadline is not None and time.time() >= deadline:
            exc = TimeoutError(f"no signal {name!r} within {timeout} s")
            await self._record_value(key, f"signal:{name}", None, error_to_json(exc))
            raise exc
        raise Suspend(deadline, name)

    async def _wait_in_memory(self, name: str, timeout: float | None) -> Any:
        box = self._mailbox.setdefault(name, deque())
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while not box:
                    fut: asyncio.Future[None] = loop.create_future()
                    self._waiters.setdefault(name, []).append(fut)
                    await fut
        except TimeoutError:
            raise TimeoutError(f"no signal {name!r} within {timeout} s") from None
        return box.popleft()

    def deliver(self, name: str, payload: Any) -> None:
        """Hand a signal to a run waiting in memory."""
        self._mailbox.setdefault(name, deque()).append(payload)
        for fut in self._waiters.pop(name, []):
            if not fut.done():
                fut.set_result(None)

    async def patched(self, parent_key: str, ctx: Context, change: str) -> bool:
        key = f"{parent_key}.{ctx._seq + 1}" if parent_key else str(ctx._seq + 1)
        rec = self.replay.get(key)
        marker = f"stalwart.patch:{change}"
        if rec is not None and rec.name != marker:
            return False  # this run passed here on code without the change
        ctx._seq += 1
        if self.store is not None and rec is None:
            await self._record_value(key, f"patch:{change}", True)
        return True

    # -- child runs ------------------------------------------------------------
    async def spawn(
        self,
        key: str,
        target: Any,
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        queue: str | None,
        priority: int,
    ) -> list[str]:
        """Start child runs (idempotently: their ids derive from the step key)."""
        pol = as_policy(target)
        pol.declare_types()  # the children's results are read back here
        name = f"stalwart.spawn:{pol.name}"
        if self.store is not None:
            rec = self.replay.get(key)
            if rec is not None:
                ids: list[str] = self._replayed(rec, key, name, "{}", "", publish=False)
                return ids
        if self.host is None:
            raise RuntimeError("child runs need a Runner (this run has none)")
        ids = [child_run_id(self.run_id, key, i) for i in range(len(calls))]
        await self._ledger(self.host.spawn_children(self, pol, calls, ids, queue, priority))
        if self.store is not None:
            await self._record_value(key, f"spawn:{pol.name}", ids)
        return ids

    async def await_children(self, key: str, ids: list[str]) -> list[dict[str, Any]]:
        """The outcomes of child runs, suspending this run until all are done.

        The last child to finish wakes this run; a timer that backs off with
        the children's age covers any wake-up lost to a race or a crash.
        """
        if self.store is None:
            assert self.host is not None
            return await self.host.await_memory_children(ids)
        rec = self.replay.get(key)
        if rec is not None:
            out: list[dict[str, Any]] = self._replayed(
                rec, key, "stalwart.children", "{}", "", publish=False
            )
            return out
        runs = {r.id: r for r in await self._ledger(self.store.get_runs(ids))}
        missing = [i for i in ids if i not in runs]
        if missing:
            # Pruned (or deleted by hand): waiting would never end. Say so.
            raise self.halt(
                StoreError(
                    f"run {self.run_id!r}, step {key}: child run {missing[0]!r} is not in the "
                    f"store ({len(missing)} of {len(ids)} missing); it was deleted before this "
                    "run read it"
                )
            )
        if all(r.status in TERMINAL for r in runs.values()):
            outcomes = [
                {"status": runs[i].status, "result": runs[i].result, "error": runs[i].error}
                for i in ids
            ]
            await self._record_value(key, "children", outcomes)
            return outcomes
        # The last child to finish wakes this run, and suspending re-checks
        # the children, so the timer is only a safety net (a worker that died
        # between finishing a child and waking us): it backs off to 30 s.
        now = time.time()
        oldest = min((r.created_at for r in runs.values()), default=now)
        backoff = min(30.0, max(0.5, now - oldest))
        raise Suspend(now + backoff, f"{CHILDREN_WAIT}{child_group(ids[0]) if ids else ''}")

    # -- the root ------------------------------------------------------------
    async def run_root(
        self, pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self.plain and pol.simple:
            return await self._plain("", pol, args, kwargs)
        return await self._full("", pol, args, kwargs, root=True)


def leaves_of(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    """Every exception inside a (nested) exception group."""
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(leaves_of(exc))
        else:
            out.append(exc)
    return out


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
