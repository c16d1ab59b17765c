"""Guardrails: checks an agent's question, answer and tool calls must pass.

A guardrail is a policy that reads messages and returns a :class:`Verdict`:
a plain function (a heuristic), a function that asks a model, or an
:class:`~stalwart.llm.Agent` whose ``output_type`` is :class:`Verdict`. An
agent runs three kinds:

* **input** guardrails read the question (after the history) before the
  agent answers;
* **output** guardrails read the final answer (after the question);
* **tool** guardrails read each tool call the model makes, before it runs.

Every check is a recorded step of the agent's answer, so its verdict is in
the ledger, the inspector and the event stream like any step's, and a
resumed run replays it without calling the guardrail again. A trip ends the
answer with :class:`~stalwart.llm.GuardrailTripped` naming the guardrail,
the stage and the reason: an error of the agent's step (S4), raised again
on replay from the recorded verdicts, never by checking again.

Where the checks sit in the run (S1):

* the guardrails of one stage run concurrently, keyed in the order they were
  given; the first trip in that order wins, whatever finished first;
* with ``concurrent=True``, the input guardrails run beside the first model
  call. The model call always finishes and is recorded (a replay must find
  the same steps), but its answer is discarded on a trip, and the tool
  calls it makes wait for the input verdict: on a trip none of them runs;
* a tool call is answered by a gate, an unrecorded step that takes the
  tool's name and arguments: it runs the tool guardrails as its own steps,
  then the tool as a step below it. The gate runs again on replay, reading
  the recorded verdicts, so a trip needs no record of its own. Calls of the
  same reply are checked concurrently: one whose checks passed runs even if
  a sibling tripped; the answer ends after the round.

An agent without guardrails has none of this: no step, no gate, no await.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.context import Context
from ..core.declared import register_type
from ..core.errors import GuardrailTripped
from ..core.keys import key_parts
from ..core.message import Message, Text, plain
from ..core.policy import Policy, as_policy
from ._kinds import is_agent

__all__ = ["Guardrails", "Verdict"]


@dataclass(frozen=True)
class Verdict:
    """What a guardrail decides: pass, or trip with a reason.

    Build one with :meth:`ok` or :meth:`trip`. An agent used as a guardrail
    answers with one when its ``output_type`` is ``Verdict``.
    """

    tripped: bool = False
    reason: str = ""

    @classmethod
    def ok(cls) -> Verdict:
        """The checked messages may go on."""
        return cls()

    @classmethod
    def trip(cls, reason: str) -> Verdict:
        """Stop the agent's answer, saying why."""
        return cls(True, reason)


register_type(Verdict)  # verdicts are step results, read back on replay


class _Round:
    """One model call of a guarded agent, as its gates see it: the input
    verdict they wait for (the first round of ``concurrent=True``) and the
    trips they found, by call key."""

    __slots__ = ("inputs", "trips")

    def __init__(self, inputs: asyncio.Future[BaseException | None] | None = None) -> None:
        self.inputs = inputs
        self.trips: list[tuple[str, GuardrailTripped]] = []

    def first_trip(self) -> GuardrailTripped | None:
        """The trip of the first call in call order (S1), not the first to finish."""
        if not self.trips:
            return None
        return min(self.trips, key=lambda t: key_parts(t[0]))[1]


# The round of the model call whose tool calls are being dispatched: set by
# the guarded agent's loop around the call, read by its gates (the engine
# runs a reply's calls in tasks that copy the caller's context).
_ROUND: contextvars.ContextVar[_Round | None] = contextvars.ContextVar(
    "stalwart_guardrail_round", default=None
)


class _Check:
    """One guardrail: a name and how to ask it."""

    def __init__(self, agent_name: str, stage: str, target: Any) -> None:
        self.agent_name = agent_name
        self.stage = stage
        kind = self.kind = stage.replace("_", " ")  # how messages name the stage
        self.target = target
        self.is_agent = is_agent(target)
        if self.is_agent:
            if target.output_type is not Verdict:
                raise ValueError(
                    f"agent {agent_name!r}: the {kind} guardrail {target.name!r} is an agent "
                    "whose output_type is not Verdict; give it output_type=Verdict"
                )
            self.name: str = target.name
        else:
            pol = as_policy(target)
            self.name = pol.name
            params = pol.signature.params
            needs = [p.name for p in params if p.default is p.empty and p.name != "messages"]
            if needs or "messages" not in {p.name for p in params}:
                raise ValueError(
                    f"agent {agent_name!r}: the {kind} guardrail {self.name!r} must take "
                    "`messages` (a list of messages) and nothing else it requires; it takes "
                    f"({', '.join(p.name for p in params)})"
                )

    async def verdict(self, ctx: Context, messages: list[Message]) -> Verdict:
        """Ask the guardrail about ``messages``: one recorded step."""
        if self.is_agent:
            got = await ctx.call(self.target, question=_render(messages))
        else:
            got = await ctx.call(self.target, messages=messages)
        if not isinstance(got, Verdict):
            raise TypeError(
                f"agent {self.agent_name!r}: the {self.kind} guardrail {self.name!r} returned "
                f"{type(got).__name__}, not a Verdict (return Verdict.ok() or Verdict.trip(reason))"
            )
        return got


class Guardrails:
    """An agent's guardrails, and where its loop consults them.

    Made by the agent only when it has some (:meth:`of`); its loop asks
    :meth:`check_input`, :meth:`first_call`, :meth:`call` and
    :meth:`check_output`, and offers the model :meth:`gated` options.
    """

    def __init__(
        self,
        agent_name: str,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        tools: Sequence[Any],
        concurrent: bool,
    ) -> None:
        self.agent_name = agent_name
        self.inputs = [_Check(agent_name, "input", g) for g in inputs]
        self.outputs = [_Check(agent_name, "output", g) for g in outputs]
        self.tools = [_Check(agent_name, "tool_call", g) for g in tools]
        self.concurrent = concurrent and bool(self.inputs)
        for stage, checks in (
            ("input", self.inputs),
            ("output", self.outputs),
            ("tool call", self.tools),
        ):
            names = [c.name for c in checks]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(
                    f"agent {agent_name!r} has several {stage} guardrails named {', '.join(twice)}"
                )
        # Gates answer tool calls when they need checking, or must wait for the input verdict.
        self.gates_tools = bool(self.tools) or self.concurrent

    def __stalwart_version__(self) -> list[Any]:
        """Each stage's guardrails, in order (a policy's code version)."""
        return [
            "input", [c.target for c in self.inputs],
            "output", [c.target for c in self.outputs],
            "tool_call", [c.target for c in self.tools],
            "concurrent", self.concurrent,
        ]  # fmt: skip

    @classmethod
    def of(
        cls,
        agent_name: str,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        tools: Sequence[Any],
        concurrent: bool,
    ) -> Guardrails | None:
        """The guardrails, or None when there are none (the loop then does nothing more)."""
        if not (inputs or outputs or tools):
            if concurrent:
                raise ValueError(
                    f"agent {agent_name!r}: concurrent_guardrails needs input_guardrails"
                )
            return None
        return cls(agent_name, inputs, outputs, tools, concurrent)

    # -- the stages ------------------------------------------------------------------
    async def _stage(
        self, ctx: Context, checks: list[_Check], messages: list[Message]
    ) -> GuardrailTripped | None:
        """Every check of a stage, concurrently (keyed in the order given); the
        first trip in that order."""
        if len(checks) == 1:
            verdicts: list[Verdict | BaseException] = [await checks[0].verdict(ctx, messages)]
        else:
            # All finish (none is cancelled halfway), and the first failure in
            # the order given is raised: the same on every execution.
            verdicts = await asyncio.gather(
                *(c.verdict(ctx, messages) for c in checks), return_exceptions=True
            )
        for check, v in zip(checks, verdicts, strict=True):
            if isinstance(v, BaseException):
                raise v
            if v.tripped:
                return GuardrailTripped(self.agent_name, check.name, check.stage, v.reason)
        return None

    async def check_input(
        self, ctx: Context, question: str, history: Sequence[Message] | None
    ) -> None:
        """Before the first model call (unless concurrent): raise on a trip."""
        if self.inputs and not self.concurrent:
            trip = await self._stage(ctx, self.inputs, _asked(question, history))
            if trip is not None:
                raise trip

    async def check_output(self, ctx: Context, question: str, out: list[Message]) -> None:
        """The final answer (``out``, the last reply), after the question: raise on a trip."""
        if self.outputs:
            answer = [m for m in out if m.action_result is None]
            trip = await self._stage(ctx, self.outputs, [Message.user(question), *answer])
            if trip is not None:
                raise trip

    async def call(self, model_call: Awaitable[list[Message]]) -> list[Message]:
        """A model call after the first (or the first, not concurrent): its
        tool calls gated; raise the first trip among them."""
        if not self.gates_tools:
            return await model_call
        return await self._gated_round(_Round(), model_call)

    async def first_call(
        self,
        ctx: Context,
        question: str,
        history: Sequence[Message] | None,
        model_call: Callable[[], Awaitable[list[Message]]],
    ) -> list[Message]:
        """The first model call: with ``concurrent``, beside the input
        guardrails (started first, so keyed first), and discarded on a trip."""
        if not self.concurrent:
            return await self.call(model_call())
        waiting: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

        async def inputs() -> GuardrailTripped | None:
            outcome: BaseException | None = None
            try:
                outcome = await self._stage(ctx, self.inputs, _asked(question, history))
                return outcome
            except BaseException as exc:
                outcome = exc
                raise
            finally:
                waiting.set_result(outcome)  # the gates of this round refuse on anything but None

        # Both finish whatever the other does, so the model call is recorded
        # on a trip too (a replay finds the steps it found); then the input
        # outcome decides, before the model's.
        checked, answered = await asyncio.gather(
            inputs(), self._gated_round(_Round(waiting), model_call()), return_exceptions=True
        )
        if checked is not None:
            raise checked  # a trip or a failed check: the model's answer is discarded
        if isinstance(answered, BaseException):
            raise answered
        return answered

    async def _gated_round(
        self, round_: _Round, model_call: Awaitable[list[Message]]
    ) -> list[Message]:
        token = _ROUND.set(round_)
        try:
            out = await model_call
        finally:
            _ROUND.reset(token)
        trip = round_.first_trip()
        if trip is not None:
            raise trip
        return out

    # -- tool calls ------------------------------------------------------------------
    def gated(self, options: list[Policy[Any, Any]]) -> list[Policy[Any, Any]]:
        """The options as the model is offered them: each behind a gate, when gated."""
        if not self.gates_tools:
            return options
        return [_gate(self, tool) for tool in options]


class _Gate:
    """What runs when a guarded agent's model calls a tool: the checks, then the tool."""

    def __init__(self, guards: Guardrails, tool: Policy[Any, Any]) -> None:
        self.guards = guards
        self.tool = tool
        self.name = tool.name

    async def __call__(self, ctx: Context, **arguments: Any) -> Any:
        round_ = _ROUND.get()
        waiting = round_.inputs if round_ is not None else None
        # The first round of concurrent input checks: no tool runs before they pass.
        if waiting is not None and await asyncio.shield(waiting) is not None:
            return _refusal("the input guardrails did not pass")
        if self.guards.tools:
            key = ctx.step_key
            asked = [Message.call(self.tool.name, plain(arguments), id=f"call_{key}")]
            trip = await self.guards._stage(ctx, self.guards.tools, asked)
            if trip is not None:
                if round_ is not None:
                    round_.trips.append((key, trip))
                return _refusal(str(trip))
        token = _ROUND.set(None)  # what the tool runs (a sub-agent) is not this round
        try:
            return await ctx.call(self.tool, **arguments)
        finally:
            _ROUND.reset(token)


def _gate(guards: Guardrails, tool: Policy[Any, Any]) -> Policy[Any, Any]:
    """``tool`` behind a gate: its name, description, arguments, lock and
    approval (docs/approvals.md), not recorded (the checks and the tool below
    it are)."""
    gate: Policy[Any, Any] = Policy(
        _Gate(guards, tool),
        name=tool.name,
        description=tool.description,
        record=False,
        exclusive=tool.exclusive,  # the engine takes the tool's lock for the gate
        approval=tool.approval,  # and asks a person before the gate, as for the tool
        approval_timeout=tool.approval_timeout,
    )
    gate.signature = tool.signature  # the model sees, and the engine validates, the tool's
    return gate


def _refusal(why: str) -> Message:
    return Message("tool", "guardrail", (Text(f"not run: {why}"),))


def _asked(question: str, history: Sequence[Message] | None) -> list[Message]:
    return [*(history or ()), Message.user(question)]


def _render(messages: list[Message]) -> str:
    """Messages as the text an agent used as a guardrail is asked to judge."""
    lines = []
    for m in messages:
        if m.action_call is not None:
            args = json.dumps(plain(m.action_call.arguments), ensure_ascii=False, sort_keys=True)
            lines.append(f"{m.role} calls {m.action_call.name} with {args}")
        elif m.text:
            lines.append(f"{m.role}: {m.text}")
    return "\n\n".join(lines)
