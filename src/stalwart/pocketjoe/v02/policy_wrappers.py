"""How a bound PocketJoe 0.2 policy function runs: as Stalwart steps.

``await ctx.llm(observations=..., options=[...])`` inside a run is:

* the *decision*: one recorded step named after the policy's tool name
  (``llm_policy``), which awaits the function. Its reply is recorded, so a
  model's answer is never paid for twice after a crash (S2);
* the *actions*: the reply's option calls that no option result in the same
  reply answers are run by Stalwart's options dispatch: checked against the
  options offered (the ``OptionSchema`` list's names; every bound policy
  when none are passed), arguments validated against the option's schema,
  each call a recorded step, concurrently; an unknown option, invalid
  arguments or an exception become an error result
  (``OptionResultPayload(is_error=True, error_type=..., error_message=...)``)
  the model can read, where PocketJoe raised;
* the reply followed by one ``OptionResultPayload`` message per call, in call
  order, whose ``result`` is what the option returned (a string, a pydantic
  model, a list of messages...).

A reply that is not a list of messages (a policy returning a string, a dict,
a pydantic model) is returned as it is, as in PocketJoe.

The step around decision and actions is not recorded (``record=False``): it
only holds the child keys (S1), and what it returns is rebuilt from its
recorded children.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ...core.message import ActionCall, ActionResult, thaw
from ...core.message import Message as SwMessage
from ...core.policy import Policy as SwPolicy
from ...core.policy import current_context
from .core import BaseContext, OptionSchema
from .message import (
    Message,
    OptionCallPayload,
    OptionResultPayload,
    TextPart,
    from_record,
    to_record,
)

__all__ = ["BoundPolicy", "from_stalwart", "invoke_options_wrapper_for_func", "to_stalwart"]

# The policy's own ``options`` argument travels under this name: for
# Stalwart's engine ``options`` means "dispatch the reply against these".
_PJ_OPTIONS = "pocketjoe_options"
_META = "pocketjoe"


def is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, Message) for m in value)


def to_stalwart(messages: list[Message]) -> list[SwMessage]:
    """PocketJoe messages as Stalwart messages, each keeping its own form in
    ``meta``; an option call no result in the reply answers becomes an
    action call, and an option result an action result."""
    out: list[SwMessage] = []
    for m in messages:
        call = result = None
        if isinstance(m.payload, OptionCallPayload):
            p = m.payload
            call = ActionCall(p.invocation_id, p.option_name, dict(p.arguments))
        elif isinstance(m.payload, OptionResultPayload):
            r = m.payload
            result = ActionResult(r.invocation_id, r.option_name, r.result)
        meta = {_META: to_record(m)}
        out.append(
            SwMessage(
                "tool" if result is not None else "assistant",
                m.policy,
                action_call=call,
                action_result=result,
                meta=meta,
            )
        )
    answered = {m.action_result.call_id for m in out if m.action_result is not None}
    return [
        SwMessage(m.role, m.actor, meta=m.meta)
        if m.action_call is not None and m.action_call.id in answered
        else m
        for m in out
    ]


def from_stalwart(messages: list[SwMessage]) -> list[Message]:
    """A reply and the dispatch's results as PocketJoe messages."""
    out: list[Message] = []
    for m in messages:
        if m.meta and _META in m.meta:
            # A PocketJoe message may be changed: it gets its own copy of
            # the read-only payload the Stalwart message carries.
            out.append(from_record(thaw(m.meta[_META])))
            continue
        r = m.action_result
        if r is None:  # not from a PocketJoe policy: keep its text
            out.append(Message(policy=m.actor, parts=[TextPart(text=m.text)]))
            continue
        failed = r.error_type is not None
        payload = OptionResultPayload(
            invocation_id=r.call_id,
            option_name=r.name,
            result=None if failed else thaw(r.value),
            is_error=failed,
            error_type=r.error_type,
            error_message=r.error_message,
        )
        out.append(Message(policy=r.name, payload=payload))
    return out


def offered_names(options: Any) -> list[str] | None:
    """The option names a policy was offered, or None for "any bound policy"."""
    if options is None:
        return None
    names = []
    for option in options:
        if isinstance(option, OptionSchema):
            names.append(option.name)
        elif isinstance(option, str):
            names.append(option)
        else:  # a policy function or a binding (``ctx.web_search``)
            names.append(OptionSchema.from_func_single(option).name)
    return names


class BoundPolicy:
    """A policy function bound on an application context: await it like the function."""

    def __init__(self, func: Callable[..., Any], ctx: BaseContext, runner: Any) -> None:
        self.func = func
        self.ctx = ctx
        self.runner = runner
        self.name = OptionSchema.from_func_single(func).name
        self._step: SwPolicy[Any, Any] | None = None

    def step_policy(self) -> SwPolicy[Any, Any]:
        """The Stalwart policy this binding runs as (made once and kept, so a
        runner sees one policy per name, S13)."""
        if self._step is None:
            self._step = _make_step(self)
        return self._step

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "options" in kwargs:
            kwargs[_PJ_OPTIONS] = kwargs.pop("options")
        step = current_context()
        if step is None:
            return await self.runner.run_top(self, args, kwargs)
        return await step.call(self.step_policy(), *args, **kwargs)

    def allowed(self, offered: Any) -> list[SwPolicy[Any, Any]]:
        """The options a reply's calls may name: those offered, else every
        policy bound on the context."""
        bound = self.ctx.bound_policies()
        names = offered_names(offered)
        if names is None:
            return [b.step_policy() for b in bound.values()]
        return [bound[n].step_policy() for n in names if n in bound]

    def __repr__(self) -> str:
        return f"<bound pocketjoe policy {self.name}>"


def _make_step(bound: BoundPolicy) -> SwPolicy[Any, Any]:
    func = bound.func
    schema = OptionSchema.from_func_single(func)
    names = list(inspect.signature(func).parameters)

    async def decide(*args: Any, **kwargs: Any) -> Any:
        kwargs.update(zip(names, args, strict=False))
        kwargs.pop("options", None)  # Stalwart's dispatch keyword, not the policy's
        if _PJ_OPTIONS in kwargs:
            kwargs["options"] = kwargs.pop(_PJ_OPTIONS)
        reply = await func(**kwargs)
        return to_stalwart(reply) if is_messages(reply) else reply

    decision: SwPolicy[Any, Any] = SwPolicy(
        _like(func, decide), name=schema.name, description=schema.description
    )
    # Declared now, not at the first durable record: an option's value (a
    # pydantic model it returns) is checked as recordable in memory too.
    decision.declare_types()

    async def act(*args: Any, **kwargs: Any) -> Any:
        # A durable run's inputs come back bound to the signature: by position.
        kwargs.update(zip(names, args, strict=False))
        if "options" in kwargs and _PJ_OPTIONS not in kwargs:
            kwargs[_PJ_OPTIONS] = kwargs.pop("options")
        step = current_context()
        assert step is not None  # a step's body always runs inside its run
        allowed = bound.allowed(kwargs.get(_PJ_OPTIONS))
        reply = await step.call(decision, options=allowed, **kwargs)
        if isinstance(reply, list) and reply and all(isinstance(m, SwMessage) for m in reply):
            return from_stalwart(reply)
        return reply

    return SwPolicy(
        _like(func, act), name=schema.name, description=schema.description, record=False
    )


def _like(func: Callable[..., Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` dressed as ``func``: the name, docstring, hints and signature
    Stalwart builds the schema and validation from."""
    out: Any = functools.wraps(func)(fn)
    out.__signature__ = inspect.signature(func)
    return out  # type: ignore[no-any-return]


def invoke_options_wrapper_for_func(func: Callable[..., Any], ctx: BaseContext) -> Any:
    """PocketJoe 0.2's wrapper: run ``func``, then the option calls in its
    reply through the context's bound policies. Kept for programs that call
    it; a bound policy does this as Stalwart steps already."""

    async def wrapped(**kwargs: Any) -> Any:
        reply = await func(**kwargs)
        if not is_messages(reply):
            return reply
        done = {
            m.payload.invocation_id for m in reply if isinstance(m.payload, OptionResultPayload)
        }
        results = []
        for m in reply:
            call = m.payload
            if isinstance(call, OptionCallPayload) and call.invocation_id not in done:
                bound = ctx.bound_policies()[call.option_name]
                value = await bound(**call.arguments)
                payload = OptionResultPayload(
                    invocation_id=call.invocation_id, option_name=call.option_name, result=value
                )
                results.append(Message(policy=call.option_name, payload=payload))
        return [*reply, *results]

    return wrapped
