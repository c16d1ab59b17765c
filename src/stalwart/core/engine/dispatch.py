"""Options dispatch: a step called with ``options`` returns action calls;
the engine, not the policy, executes them. A part of the
:class:`~.engine.Engine`, which makes it and owns it (``engine.dispatch``).

Each call is checked against the offered options (an allow-list), its
arguments validated against the option's schema, and it runs as a recorded
step of its own, concurrently with its siblings, keyed in call order (S1). A
failure becomes an error result the model can read; a halted run stays
halted. The reply is the messages followed by the results, in call order.

Three rules on top of that:

* a call the reply already answers (its result is among the messages) is not
  run again, and its result is not added twice;
* call ids are unique within a reply: a call whose id an earlier call of the
  same reply already has is not run; its result (in its place, under that
  id) is a ``DuplicateCallId`` error naming the id and the step of the call
  that ran. Keys stay positional (the duplicate's number is taken, never
  recorded), so a replay keys and answers every call as before; a ledger
  written when duplicates ran replays as it ran (the duplicate's key is in
  it);
* an ``exclusive`` option runs one call at a time within the run (its lock
  is the run's, so sibling calls, sub-agents and parallel branches of
  one run wait for each other; other runs are not held back). A call that
  would wait for a lock held by a call that is itself waiting, through any
  chain of such waits, for a lock this call's callers hold (tool X holding
  "a" asks for "b" while tool Y holding "b" asks for "a") would wait for
  ever: it is not run, and its result is an ``ExclusiveDeadlock`` error
  naming the locks and the step. The check is made once, when the call
  would start waiting (the run's :class:`~.locks.LockTable`); nothing
  polls. A call made from inside the call holding its lock is refused the
  same way (``ExclusiveReentry``). Such a refusal is recorded as the call's
  step (kind ``refused:<option>``, under the key the call has), since
  whether the locks crossed depends on timing: a resumed run replays the
  refusal instead of running the call (S2). A ledger written before
  refusals were recorded has no record there and checks again, as it did;
  a duplicate call id needs no record: it is read from the recorded reply;
* an option made with ``approval=`` may need a person's decision: the
  reply's calls that do wait for it, durably, before any call of the reply
  runs; a denied call's result is its reason, an edited call runs as
  edited (:mod:`.approvals`, docs/approvals.md);
* options may be named (``options=["web_search"]``) or given as tool specs:
  :meth:`Dispatch.offered` resolves them to policies before the step runs,
  so the model, the record (S1, S5) and the allow-list all see policies.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .. import codec
from ..context import Context
from ..errors import (
    ArgumentError,
    CorruptedRecord,
    SerializationError,
    StepError,
    UnknownOption,
)
from ..message import ActionCall, Message, thaw
from ..policy import Policy, ToolSpec, current_step, declared_policy
from .approvals import Approvals, asks_approval
from .identity import OPTIONS, option_policies, step_hash
from .locks import LockTable
from .unwind import NOT_STEP_ERRORS, Halt, leaves_of

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["Dispatch", "bound_policies"]


def bound_policies(ctx_class: type[Context]) -> dict[str, Policy[Any, Any]]:
    """The policies an application context class binds, by attribute name.

    Class attributes only (``class App(sw.Context): search = web_search``),
    read without calling any descriptor; agents, journeys and flows bound
    there count too (anything with a ``__stalwart_policy__``). Methods of the
    class are not options.
    """
    out: dict[str, Policy[Any, Any]] = {}
    for klass in reversed(ctx_class.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, Context)):
            continue
        for attr, value in vars(klass).items():
            found = declared_policy(value)
            if found is not None:
                out[attr] = found
    return out


class Dispatch:
    """The options dispatch of one run."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._locks: LockTable | None = None  # made at the run's first exclusive call
        self._approvals: Approvals | None = None  # made at the run's first option needing one

    # -- what is offered ---------------------------------------------------------
    def offered(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with every option that is a name or a tool spec replaced by
        the policy it names; the caller's own dict is never changed.

        Names are looked up in the application context the calling step runs
        under (its class attributes: the attribute name, then the bound
        policy's own name), then among the policies the runner was given.
        An unknown name is the program's mistake, raised at the call as
        :class:`UnknownOption`; nothing a model says is looked up here.
        """
        options = kwargs[OPTIONS]
        if type(options) is list and all(type(o) is Policy for o in options):
            return kwargs  # the common case: policies, nothing to resolve or refuse
        if isinstance(options, list | tuple) and any(
            isinstance(o, str | ToolSpec) for o in options
        ):
            caller = current_step.get()
            options = [
                self._named(o, i, caller) if isinstance(o, str | ToolSpec) else o
                for i, o in enumerate(options)
            ]
            kwargs = {**kwargs, OPTIONS: options}
        # What cannot be an option fails here, before the model is paid for.
        option_policies(options)
        return kwargs

    def _named(self, option: str | ToolSpec, i: int, caller: Context | None) -> Policy[Any, Any]:
        name = option if isinstance(option, str) else option.name
        bound = bound_policies(type(caller)) if caller is not None else {}
        pol = bound.get(name) or next((p for p in bound.values() if p.name == name), None)
        if pol is None:
            host = self.engine.host
            pol = host.find_policy(name) if host is not None else None
        if pol is not None:
            return pol
        step = (caller.step_key if caller is not None else "") or "(root)"
        where = f"step {step} of run {self.engine.run_id!r}"
        ctx_name = type(caller).__name__ if caller is not None else "(no context)"
        known = ", ".join(sorted({*bound, *(p.name for p in bound.values())})) or "(none)"
        raise UnknownOption(
            f"options[{i}] names {name!r} in {where}, but no policy has that name: "
            f"the context {ctx_name} binds {known}, and the runner was not given one named "
            f"{name!r} (Runner(policies=[...])); offer the policy itself, bind it on the "
            "context class, or register it"
        )

    # -- running the calls --------------------------------------------------------
    async def run(self, key: str, result: Any, options: Any, pol: Policy[Any, Any]) -> Any:
        """Run the action calls in ``result`` (the reply of step ``key``,
        offered ``options``) and return the messages followed by the results."""
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
        answered = {m.action_result.call_id for m in messages if m.action_result is not None}
        # S1: keyed by position among all the reply's calls, taken now; a call
        # the reply answers itself keeps its number and is simply not run,
        # unless the ledger holds it: a run recorded before answered calls were
        # skipped replays as it ran (its result appended), so it stays the same.
        replay = self.engine.replay
        keyed = [(f"{key}#{i}", c) for i, c in enumerate(calls, 1)]
        todo = [(k, c) for k, c in keyed if c.id not in answered or k in replay]
        if not todo:
            return messages
        allowed = {p.name: p for p in option_policies(options)}
        decided: list[tuple[str, ActionCall | Message]] = todo  # type: ignore[assignment]
        if asks_approval(allowed):  # docs/approvals.md: decided before any call runs
            approvals = self._approvals
            if approvals is None:
                approvals = self._approvals = Approvals(self.engine)
            decided = await approvals.decide(key, todo, allowed, self._refused)
        if len(decided) == 1:
            k, call = decided[0]
            return [*messages, await self._guarded(None, k, allowed, call)]
        duplicates = _duplicates(keyed, replay)
        if duplicates:
            decided = [(k, c) for k, c in decided if k not in duplicates]
        limit = pol.max_parallel or self.engine.max_parallel
        sem = asyncio.Semaphore(limit) if limit else None
        tasks: dict[str, asyncio.Task[Message]] = {}
        try:
            async with asyncio.TaskGroup() as tg:
                for k, call in decided:
                    tasks[k] = tg.create_task(self._guarded(sem, k, allowed, call))
        except BaseExceptionGroup as group:
            # A store failure or nondeterminism in one call is the run's
            # problem, not a result: surface it as itself, not as a group.
            for exc in leaves_of(group):
                if isinstance(exc, Halt | NOT_STEP_ERRORS):
                    raise exc from group
            raise
        if not duplicates:
            return [*messages, *(t.result() for t in tasks.values())]
        results = []
        for k, call in keyed:
            if k in tasks:
                results.append(tasks[k].result())
            elif k in duplicates and call.id not in answered:
                results.append(_duplicate(k, call, duplicates[k]))
        return [*messages, *results]

    async def _guarded(
        self,
        sem: asyncio.Semaphore | None,
        key: str,
        allowed: dict[str, Policy[Any, Any]],
        call: ActionCall | Message,
    ) -> Message:
        """One call under the parallelism limit, then its option's lock (if
        exclusive); a denied call's result (a message) as it is.

        The slot comes first: a slot belongs to one reply's calls, so a lock
        holder never waits for one (the other order hung when a holder's
        inner call waited for a lock whose holder waited for the slot). A
        recorded call takes no lock: it replays its result, and whether a
        lock cycle exists depends on timing, so checking it on replay could
        refuse a call that ran (S2)."""
        if isinstance(call, Message):
            return call
        pol = allowed.get(call.name)
        lock_name = _lock_name(pol) if pol is not None and call.invalid is None else None
        rec = self.engine.replay.get(key)
        if rec is not None and rec.name.startswith(_REFUSED):  # refused when it ran
            return self._replayed_refusal(key, call)
        if lock_name is None or rec is not None:  # no lock, or recorded: replays without
            if sem is None:
                return await self._action(key, allowed, call)
            async with sem:
                return await self._action(key, allowed, call)
        if sem is None:
            return await self._locked(key, allowed, call, lock_name)
        async with sem:
            return await self._locked(key, allowed, call, lock_name)

    async def _locked(
        self, key: str, allowed: dict[str, Policy[Any, Any]], call: ActionCall, lock_name: str
    ) -> Message:
        """``call`` under its lock, or a result saying why waiting would never end.

        A refusal is recorded as the call's step (S2): whether a lock cycle
        exists depends on timing, so a run resumed before the reply that read
        the refusal was recorded could find none and run the call."""
        locks = self._locks
        if locks is None:
            locks = self._locks = LockTable()
        if locks.reentered(lock_name):
            refusal = Message.result(
                call,
                error_type="ExclusiveReentry",
                error_message=(
                    f"{call.name!r} is exclusive ({_lock_label(lock_name)}) and this call "
                    f"(step {key}) was made from inside a call holding that lock: it would "
                    "wait for itself for ever, so it was not run"
                ),
            )
            return await self._refused(key, call, refusal)
        cycle = locks.cycle(lock_name)
        if cycle is not None:
            chain = ", held by a call waiting for ".join(_lock_label(n) for n in cycle)
            refusal = Message.result(
                call,
                error_type="ExclusiveDeadlock",
                error_message=(
                    f"{call.name!r} (step {key}) needs {chain}, which this call was made "
                    "from inside: waiting would never end, so it was not run (take "
                    "the locks in one order)"
                ),
            )
            return await self._refused(key, call, refusal)
        async with locks.hold(lock_name):
            return await self._action(key, allowed, call)

    async def _refused(self, key: str, call: ActionCall, refusal: Message) -> Message:
        """``refusal``, recorded at the call's key, with the call's arguments
        (S5), so a replay answers the same call with it."""
        if self.engine.store is None:
            return refusal
        args_json = _refused_args(call)
        await self.engine.record_value(
            key, _refused_kind(call), refusal, args_json=args_json, args_hash=step_hash(args_json)
        )
        return refusal

    def _replayed_refusal(self, key: str, call: ActionCall) -> Message:
        """The refusal recorded at ``key``, answering ``call`` (whose id may be
        new: a reply that was not recorded is asked for again on replay); a
        record of another call's refusal is nondeterminism (S5)."""
        x = self.engine
        args_json = _refused_args(call)
        value = x.replayed_value(
            x.replay[key],
            key,
            f"stalwart.{_refused_kind(call)}",
            args_json,
            step_hash(args_json),
            publish=False,
        )
        if not isinstance(value, Message) or value.action_result is None:
            raise x.halt(
                CorruptedRecord(
                    f"step {key} of run {x.run_id!r}: the recorded refusal of "
                    f"{call.name!r} is not an action result"
                )
            )
        was = value.action_result
        return Message.result(call, error_type=was.error_type, error_message=was.error_message)

    async def _action(
        self, key: str, allowed: dict[str, Policy[Any, Any]], call: ActionCall
    ) -> Message:
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
            # The option gets arguments of its own to change as it likes:
            # the call's are read-only, part of the conversation.
            kwargs = pol.validate(thaw(call.arguments))
        except ArgumentError as exc:
            return Message.result(call, error_type="InvalidArguments", error_message=str(exc))
        try:
            value = await self.engine.step(key, pol, (), kwargs)
        except NOT_STEP_ERRORS:
            raise
        except Exception as exc:
            err_type = exc.error_type if isinstance(exc, StepError) else type(exc).__name__
            msg = exc.error_message if isinstance(exc, StepError) else str(exc)
            return Message.result(call, error_type=err_type, error_message=msg)
        try:
            codec.encode(value, f"result of {name!r}")
        except SerializationError as exc:
            return Message.result(call, error_type="SerializationError", error_message=str(exc))
        message = Message.result(call, value, actor=pol.name)
        if isinstance(value, Message) and value.parts:
            # An option that answers with a message (an MCP tool's text and
            # images, say): its parts are what the model reads, media included.
            message = replace(message, parts=value.parts)
        return message


def _duplicates(keyed: list[tuple[str, ActionCall]], replay: Any) -> dict[str, str]:
    """The calls (by key) whose id an earlier call of the reply has, each
    with that first call's key; a call the ledger holds ran, and replays."""
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for k, call in keyed:
        at = first.setdefault(call.id, k)
        if at != k and k not in replay:
            out[k] = at
    return out


def _duplicate(key: str, call: ActionCall, first: str) -> Message:
    """The result of a call not run because the call at ``first`` has its id."""
    return Message.result(
        call,
        error_type="DuplicateCallId",
        error_message=(
            f"call id {call.id[:200]!r} of {call.name[:200]!r} (step {key}) is the id of "
            f"an earlier call in the same reply (step {first}), so this call was not run; "
            "give each call its own id"
        ),
    )


def _lock_name(pol: Policy[Any, Any]) -> str | None:
    """The lock an exclusive option's calls take: its own, or the shared one it names."""
    exclusive = pol.exclusive
    if exclusive is True:
        return f"policy:{pol.name}"
    if isinstance(exclusive, str) and exclusive:
        return f"lock:{exclusive}"
    return None


# The kind of a refusal's record, ``refused:<option>``: what a replay answers
# the call with instead of running it.
_REFUSED = "stalwart.refused:"


def _refused_kind(call: ActionCall) -> str:
    return f"refused:{call.name}"


def _refused_args(call: ActionCall) -> str:
    """A refused call's arguments as recorded: the codec's JSON, as its reply
    records them (a refused call is never validated, so the option's own
    identity rules do not apply; the same call always gives the same text)."""
    return codec.dumps(call.arguments, f"arguments of the refused call {call.name!r}")


def _lock_label(lock_name: str) -> str:
    kind, _, name = lock_name.partition(":")
    return "its own lock" if kind == "policy" else f"lock {name!r}"
