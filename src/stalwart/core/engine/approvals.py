"""Tool approval in a run: a reply's calls that need a person's decision
wait for it, durably, before any call of the reply runs. A part of the
:class:`~.dispatch.Dispatch`, which makes it on a reply's first option
made with ``approval=`` (so a run offering none pays nothing).

What is recorded, for the reply of step ``k`` (its calls are ``k#1``,
``k#2``...; ``#0`` is never a call's number):

* each wait, made as ``ctx.ask`` makes one, by the context of ``k#0``: its
  note (what it asks, ``about`` listing the calls), its deadline and the
  signal taken (``k#0.1``, ``k#0.2``, then ``k#0.3``... for a later wait);
* once every call is decided, the decisions by call id at ``k#0``
  (``stalwart.approvals``).

A resumed run reads the decisions at ``k#0`` and asks nobody (S2); one
that died while deciding replays the signals it took and asks only for
the calls still undecided. Whether a call needs approval is asked of the
option's ``approval`` only for calls that have not run (a call recorded
at ``k#n`` ran, approved or not needing it) and that no recorded decision
covers. A decision that does not fit (an id no call has, edited arguments
the option refuses) is not applied: the run asks again, the problem in the
new wait's note; a signal is taken once, so nothing is lost.

A call whose option's ``approval`` rule raises is not run either: it is
refused, its result an ``ApprovalError`` naming the run, the call's step,
the rule and the tool, recorded at the call's key as the dispatch records
a refusal (S14), so a replay answers it and the rule is not asked again.

A wait lasts at most the smallest ``approval_timeout`` of the calls it
asks about (``ctx.ask(timeout=)``); when it passes, the wait records the
timeout and those calls are denied ("no decision within N s"), the others
asked again in a new wait. A replay reads the timeout from the record.

A denied call does not run; its result is an ``ApprovalDenied`` error whose
message is the reason, which the model reads. An edited call runs with the
call's arguments changed as the decision says; its step records those.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..approval import DENIED, approval_signal, describe_call, read_decisions
from ..errors import ApprovalError, ArgumentError, CorruptedRecord
from ..message import ActionCall, Message, thaw
from ..policy import Policy, current_step
from .unwind import NOT_STEP_ERRORS

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["Approvals", "Refuse", "asks_approval"]

#: The kind of the record holding a reply's decisions.
APPROVALS = "approvals"

#: How a call is refused instead of run: its result, recorded at the call's
#: key so a replay answers the call with it (``Dispatch._refused``).
Refuse = Callable[[str, ActionCall, Message], Awaitable[Message]]


def asks_approval(allowed: dict[str, Policy[Any, Any]]) -> bool:
    """Whether any of these options may need a person's approval."""
    return any(p.approval is not False for p in allowed.values())


class Approvals:
    """Tool approval for the replies of one run."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def decide(
        self,
        key: str,
        todo: list[tuple[str, ActionCall]],
        allowed: dict[str, Policy[Any, Any]],
        refuse: Refuse,
    ) -> list[tuple[str, ActionCall | Message]]:
        """``todo`` (the calls of the reply of step ``key`` to run, by key)
        as decided: a call to run (edited if it was), or a denied call's
        result. Suspends the run while a decision is awaited. A call whose
        ``approval`` rule raises is refused with ``refuse`` (not run: the
        model reads why, and a replay answers the call from that record)."""
        x = self.engine
        unit_key = f"{key}#0"
        rec = x.replay.get(unit_key)
        if rec is not None:
            decisions = x.replayed_value(
                rec, unit_key, f"stalwart.{APPROVALS}", "{}", "", publish=False
            )
            where = f"step {unit_key} of run {x.run_id!r}: the recorded tool approvals"
            try:
                decisions = read_decisions(decisions, None, where)
            except ApprovalError as exc:
                raise x.halt(CorruptedRecord(str(exc))) from None
        else:
            asking, failed = await self._asking(key, todo, allowed)
            refused = {k: await refuse(k, c, failed[k]) for k, c in todo if k in failed}
            if not asking:
                return [(k, refused.get(k, c)) for k, c in todo]
            decisions = await self._ask(unit_key, asking, allowed)
            if x.store is not None:
                await x.record_value(unit_key, APPROVALS, decisions)
            if refused:  # no decision covers them: they stay refused
                return [(k, refused.get(k, c)) for k, c in _applied(todo, decisions)]
        return _applied(todo, decisions)

    async def _asking(
        self,
        key: str,
        todo: list[tuple[str, ActionCall]],
        allowed: dict[str, Policy[Any, Any]],
    ) -> tuple[list[ActionCall], dict[str, Message]]:
        """The calls of ``todo`` that need a decision: not run yet, valid,
        the first with their id, and their option's ``approval`` says so;
        and, by key, the results refusing the calls whose rule raised."""
        x = self.engine
        ctx = current_step.get() or x.context(key)
        seen: set[str] = set()
        out: list[ActionCall] = []
        failed: dict[str, Message] = {}
        for k, call in todo:
            first = call.id not in seen
            seen.add(call.id)
            pol = allowed.get(call.name)
            if pol is None or pol.approval is False or not first or call.invalid is not None:
                continue
            if k in x.replay:  # it ran (or was refused): nothing left to decide
                continue
            try:
                kwargs = pol.validate(thaw(call.arguments))
            except ArgumentError:
                continue  # not run: the model reads why
            try:
                needed = await pol.needs_approval(ctx, kwargs)
            except NOT_STEP_ERRORS:
                raise
            except Exception as exc:  # the rule's own bug: the call is not run (S14)
                failed[k] = Message.result(
                    call,
                    error_type=ApprovalError.__name__,
                    error_message=_rule_failed(x, k, pol, exc),
                )
                continue
            if needed:
                out.append(call)
        return out, failed

    async def _ask(
        self, unit_key: str, asking: list[ActionCall], allowed: dict[str, Policy[Any, Any]]
    ) -> dict[str, dict[str, Any]]:
        """Wait for decisions until every call of ``asking`` has one."""
        x = self.engine
        ctx = x.context(unit_key)
        decisions: dict[str, dict[str, Any]] = {}
        pending = list(asking)
        problem: str | None = None
        while pending:
            signal = approval_signal(ctx.next_step_key())
            about: dict[str, Any] = {
                "calls": [
                    {"id": c.id, "tool": c.name, "arguments": thaw(c.arguments)} for c in pending
                ]
            }
            if problem is not None:
                about["problem"] = problem
            timeout = _timeout(pending, allowed)
            try:
                payload = await ctx.ask(
                    _prompt(pending, problem), signal=signal, about=about, timeout=timeout
                )
            except TimeoutError:  # recorded by the wait, raised again on replay
                assert timeout is not None
                reason = f"no decision within {timeout:g} s"
                for call in pending:
                    if allowed[call.name].approval_timeout == timeout:
                        decisions[call.id] = {"decision": "deny", "reason": reason}
                pending = [c for c in pending if c.id not in decisions]
                problem = None
                continue
            where = f"tool approval of run {x.run_id!r}, signal {signal!r}"
            try:
                got = read_decisions(payload, [c.id for c in pending], where)
                for call in pending:
                    if call.id in got:
                        _check_edit(call, got[call.id], allowed, where)
            except ApprovalError as exc:
                problem = str(exc)
                continue
            problem = None
            decisions.update(got)
            pending = [c for c in pending if c.id not in got]
        return decisions


def _timeout(pending: list[ActionCall], allowed: dict[str, Policy[Any, Any]]) -> float | None:
    """How long a wait asking about ``pending`` lasts: the smallest
    ``approval_timeout`` of their options (None: until a decision comes)."""
    timeouts = [t for c in pending if (t := allowed[c.name].approval_timeout) is not None]
    return min(timeouts) if timeouts else None


def _rule_failed(x: Engine, key: str, pol: Policy[Any, Any], exc: Exception) -> str:
    rule = pol.approval
    name = getattr(rule, "__qualname__", None) or repr(rule)
    module = getattr(rule, "__module__", None)
    shown = f"{module}.{name}" if module else name
    return (
        f"run {x.run_id!r}, step {key}: the approval rule {shown} of {pol.name!r} raised "
        f"{type(exc).__name__}: {exc}; the call was not run"
    )


def _check_edit(
    call: ActionCall, decision: dict[str, Any], allowed: dict[str, Policy[Any, Any]], where: str
) -> None:
    """An edit whose arguments the option refuses is an ApprovalError."""
    if decision["decision"] != "edit":
        return
    try:
        allowed[call.name].validate({**thaw(call.arguments), **decision["arguments"]})
    except ArgumentError as exc:
        raise ApprovalError(
            f"{where}[{call.id!r}]['arguments']: {exc}", f"[{call.id!r}]['arguments']"
        ) from None


def _applied(
    todo: list[tuple[str, ActionCall]], decisions: dict[str, Any]
) -> list[tuple[str, ActionCall | Message]]:
    out: list[tuple[str, ActionCall | Message]] = []
    seen: set[str] = set()
    for k, call in todo:
        decision = decisions.get(call.id) if call.id not in seen else None
        seen.add(call.id)
        kind = decision.get("decision") if isinstance(decision, dict) else None
        if kind == "deny":
            reason = str(decision.get("reason") or "denied") if decision else "denied"
            out.append((k, Message.result(call, error_type=DENIED, error_message=reason)))
        elif kind == "edit" and decision is not None:
            edited = {**thaw(call.arguments), **decision.get("arguments", {})}
            out.append((k, ActionCall(call.id, call.name, edited)))
        else:
            out.append((k, call))
    return out


def _prompt(pending: list[ActionCall], problem: str | None) -> str:
    calls = "; ".join(describe_call(c.name, thaw(c.arguments)) for c in pending)
    n = len(pending)
    ask = f"Approve {calls}?" if n == 1 else f"Approve {n} tool calls: {calls}?"
    return ask if problem is None else f"{ask} (The last decision was not applied: {problem})"
