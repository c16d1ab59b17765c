"""How a bound PocketJoe policy runs: as Stalwart steps.

A call ``await desk.answer(enquiry=...)`` becomes, inside a run:

* the *decision*: one recorded step named after the attribute
  (``answer``), which instantiates the policy class with the
  application context and awaits its ``__call__``. Its reply is recorded, so
  an LLM answer is never paid for twice after a crash (S2);
* the *actions*: the reply's ``action_call`` messages that no
  ``action_result`` in the same reply answers are turned into Stalwart action
  calls and run by Stalwart's options dispatch: checked against the offered
  options (the names in ``options=[...]``, else every policy bound on the
  context), arguments validated against the option's schema, each one a
  recorded step, concurrently, an error becoming the model's error result
  instead of failing the run;
* the reply followed by the results, as PocketJoe messages of type
  ``action_result`` carrying the call's ``tool_id``.

Outside a run, the call starts one on the runner: :class:`InMemoryRunner`
runs it in memory; :class:`DurableRunner` records it in a store, and the same
call made again (say after ``kill -9``) resumes that run by replay.

The step around decision and actions is not recorded (``record=False``): it
only holds the child keys (S1), and everything it returns is rebuilt from its
recorded children.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from ..core.message import ActionCall, thaw
from ..core.message import Message as SwMessage
from ..core.policy import Policy as SwPolicy
from ..core.policy import current_context
from .core import BaseContext, Message, Policy
from .runners import Durable, PocketJoeRunner

__all__ = ["BoundPolicy", "DurableRunner", "InMemoryRunner", "invoke_options_wrapper"]

# PocketJoe's policies take their offered options as ``options``; in Stalwart
# that keyword means "dispatch the reply against these policies". In transit
# the caller's value travels under this name and is handed back as
# ``options`` to the policy's own ``__call__``.
_PJ_OPTIONS = "pocketjoe_options"
_META = "pocketjoe"


def to_stalwart(messages: list[Message]) -> list[SwMessage]:
    """PocketJoe messages as Stalwart messages; each keeps its PocketJoe
    form in ``meta``, and an unanswered ``action_call`` becomes an action
    call (calls answered in the same reply are not run again)."""
    answered = {m.tool_id for m in messages if m.type == "action_result"}
    out: list[SwMessage] = []
    for m in messages:
        call = None
        if m.type == "action_call" and m.tool_id not in answered:
            args = m.payload.get("payload")
            name = str(m.payload.get("policy"))
            call_id = m.tool_id or m.id or f"call-{len(out)}"
            if isinstance(args, dict):
                call = ActionCall(call_id, name, args)
            else:
                why = f"payload is {type(args).__name__}, not a dict"
                call = ActionCall(call_id, name, {}, why)
        out.append(SwMessage("assistant", m.actor, action_call=call, meta={_META: m.to_dict()}))
    return out


def from_stalwart(messages: list[SwMessage]) -> list[Message]:
    """The reply and the dispatch's results back as PocketJoe messages."""
    out: list[Message] = []
    for m in messages:
        if m.meta and _META in m.meta:
            # A PocketJoe message may be changed: it gets its own copy of
            # the read-only payload the Stalwart message carries.
            out.append(Message.from_dict(thaw(m.meta[_META])))
            continue
        r = m.action_result
        if r is None:  # not produced here; keep what it says
            out.append(Message(actor=m.actor, type="text", payload={"content": m.text}, id=m.id))
        elif r.error_type is not None:
            out.append(
                Message(
                    actor=r.name,
                    type="action_result",
                    payload={"error": r.error_message, "error_type": r.error_type},
                    tool_id=r.call_id,
                )
            )
        elif isinstance(r.value, list) and all(isinstance(v, Message) for v in r.value):
            out.extend(
                v.model_copy(update={"type": "action_result", "tool_id": r.call_id})
                for v in r.value
            )
        else:
            out.append(
                Message(
                    actor=r.name,
                    type="action_result",
                    payload={"content": thaw(r.value)},
                    tool_id=r.call_id,
                )
            )
    return out


class BoundPolicy:
    """A policy class bound on an application context: await it like the class.

    Its option name is the attribute it is bound to, found when first needed
    (``_bind`` runs before the assignment, so it cannot know it).
    """

    def __init__(self, cls: type[Policy], ctx: BaseContext, runner: InMemoryRunner) -> None:
        self.cls = cls
        self.ctx = ctx
        self.runner = runner
        self._steps: dict[str, SwPolicy[Any, Any]] = {}

    @property
    def option_name(self) -> str:
        for name, value in vars(self.ctx).items():
            if value is self:
                return name
        spec = getattr(self.cls, "__policy_spec__", None)
        return spec.name if spec is not None else self.cls.__name__

    def step_policy(self) -> SwPolicy[Any, Any]:
        """The Stalwart policy this binding runs as (one per name, kept, so a
        runner sees one policy per name, S13)."""
        name = self.option_name
        pol = self._steps.get(name)
        if pol is None:
            pol = _make_step(self, name)
            self._steps[name] = pol
        return pol

    async def __call__(self, **kwargs: Any) -> Any:
        if "options" in kwargs:
            kwargs[_PJ_OPTIONS] = kwargs.pop("options")
        step = current_context()
        if step is None:
            return await self.runner.run_top(self, (), kwargs)
        return await step.call(self.step_policy(), **kwargs)

    def allowed(self, offered: Any) -> list[SwPolicy[Any, Any]]:
        """The options a reply's calls may name: those offered by name, else
        every policy bound on the context (PocketJoe's rule)."""
        bound = self.ctx.bound_policies()
        if isinstance(offered, list | tuple) and all(isinstance(o, str) for o in offered):
            return [bound[n].step_policy() for n in offered if n in bound]
        return [b.step_policy() for b in bound.values()]


def _make_step(bound: BoundPolicy, name: str) -> SwPolicy[Any, Any]:
    cls = bound.cls
    description = None
    spec = getattr(cls, "__policy_spec__", None)
    if spec is not None:
        description = spec.description or None

    names = list(inspect.signature(cls.__call__).parameters)[1:]

    async def decide(*args: Any, **kwargs: Any) -> Any:
        kwargs.update(zip(names, args, strict=False))
        # Stalwart's dispatch keyword: the options the reply is checked against.
        kwargs.pop("options", None)
        if _PJ_OPTIONS in kwargs:
            kwargs["options"] = kwargs.pop(_PJ_OPTIONS)
        reply = await cls(bound.ctx)(**kwargs)
        if isinstance(reply, list) and all(isinstance(m, Message) for m in reply):
            return to_stalwart(reply)
        return reply

    decision: SwPolicy[Any, Any] = SwPolicy(
        _like_call(cls, decide), name=name, description=description
    )

    async def act(*args: Any, **kwargs: Any) -> Any:
        # A durable run's inputs come back bound to the signature: by position.
        kwargs.update(zip(names, args, strict=False))
        step = current_context()
        assert step is not None  # a step's body always runs inside its run
        offered = kwargs.get(_PJ_OPTIONS, kwargs.get("options"))
        if "options" in kwargs and _PJ_OPTIONS not in kwargs:
            kwargs[_PJ_OPTIONS] = kwargs.pop("options")
        reply = await step.call(decision, options=bound.allowed(offered), **kwargs)
        if isinstance(reply, list) and all(isinstance(m, SwMessage) for m in reply):
            return from_stalwart(reply)
        return reply

    return SwPolicy(_like_call(cls, act), name=name, description=description, record=False)


def _like_call(cls: type[Policy], fn: Any) -> Any:
    """``fn`` dressed as the class's ``__call__`` without ``self``: the name,
    docstring, hints and signature Stalwart builds the schema and validation
    from."""
    call = cls.__call__
    out: Any = functools.wraps(call)(fn)
    sig = inspect.signature(call)
    out.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])
    return out


class InMemoryRunner(PocketJoeRunner[BoundPolicy]):
    """Runs PocketJoe programs on Stalwart's engine, in memory.

    ``store``: where runs are recorded; "memory" here (see
    :class:`DurableRunner`). What it does is in :mod:`.runners`; here is how
    0.1 binds a policy class.
    """

    def _bind_strategy(self, cls: type[Policy], ctx: BaseContext) -> BoundPolicy:
        """What ``BaseContext._bind`` asks the runner for: a binding of ``cls``
        on ``ctx`` that runs as Stalwart steps of this runner's runs."""
        return BoundPolicy(cls, ctx, self)

    def run_name(self, bound: BoundPolicy) -> str:
        """The attribute the policy class is bound to."""
        return bound.option_name


class DurableRunner(Durable[BoundPolicy], InMemoryRunner):
    """Runs PocketJoe programs durably: ``DurableRunner("sqlite:///app.db")``
    or a PostgreSQL URL; the same call made again after a crash resumes its
    run (``prefix:name:n:hash``, see :class:`.runners.Durable`)."""


def invoke_options_wrapper(policy_instance: Any, ctx: BaseContext) -> Any:
    """PocketJoe 0.1's wrapper: run a policy instance, then the action calls
    in its reply, through the context's bound policies. Kept for programs
    that call it; a bound policy already does this as Stalwart steps."""

    async def wrapped(**kwargs: Any) -> list[Message]:
        reply: list[Message] = await policy_instance(**kwargs)
        answered = {m.tool_id for m in reply if m.type == "action_result"}
        results: list[Message] = []
        for m in reply:
            if m.type != "action_call" or m.tool_id in answered:
                continue
            fn = getattr(ctx, str(m.payload.get("policy")))
            for r in await fn(**m.payload.get("payload", {})):
                results.append(r.model_copy(update={"type": "action_result", "tool_id": m.tool_id}))
        return reply + results

    return wrapped
