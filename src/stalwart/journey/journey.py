"""A journey: an agent that follows a process, step by step.

A support call goes identify, diagnose, resolve, confirm; each step has its
own instructions and its own tools. A journey is a state machine over those
steps (an ``Enum``) with a typed state (a pydantic model). Its tools change
the state and move it to another step (see :mod:`.tool_context`), and the very next
model call, in the same turn, is shown the new step's instructions, rendered
from the new state, and offered the new step's tools.

Durability comes from the core's journaling API: each model call and tool
call is a recorded step, and each change of the journey is recorded as a
step named ``stalwart.journey`` whose output is the step and the state, so
``stalwart runs show`` tells where a journey stands. A resumed run rebuilds
its step and state from those records and from recorded tool results, never
from memory, so it makes the same decisions as the run that died.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import SkipJsonSchema

from ..core.context import Context
from ..core.declared import declare_annotation
from ..core.errors import CorruptedRecord
from ..core.message import Message, thaw
from ..core.policy import Policy, as_policy
from ..llm import Usage, usage_of
from .tool_context import EFFECTS, Effects, Scope, offered, scope

__all__ = ["Journey", "JourneyReply", "Step"]

E = TypeVar("E", bound=Enum)
S = TypeVar("S", bound=BaseModel)

#: What the model is told when it has used its model calls for a turn and
#: must answer with what it has, tools withheld.
OUT_OF_ROUNDS = (
    "You have used every tool call allowed for this message. Do not call tools: "
    "reply to the user now, in plain words, with what you have done and found so far, "
    "and what they can do next."
)


@dataclass(frozen=True)
class Step:
    """One step of a journey: what the model is told there, and what it may call.

    Args:
        instructions: The step's prompt: a template whose ``{field}``
            placeholders are the state's fields (``"The customer is
            {customer}."``), or a function of the state returning the prompt.
        tools: What the model may call at this step. A tool whose first
            parameter is a :class:`~stalwart.journey.ToolContext` reads and changes
            the state and moves the journey.
        moves: The steps a tool may move the journey to from here (default:
            any).
    """

    instructions: str | Callable[[Any], str]
    tools: Sequence[Any] = ()
    moves: Collection[Enum] | None = None


@dataclass(frozen=True)
class JourneyReply:
    """The journey's answer to one message, and where the journey stands after it.

    Pass it back as ``after=`` to continue the conversation in another call
    (:meth:`Journey.reply`); a journey run as a policy does that itself.
    """

    text: str
    step: str
    state: dict[str, Any]
    done: bool = False
    messages: list[Message] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    total_usage: dict[str, int] = field(default_factory=dict)


class Journey(Generic[E, S]):
    """A step-based agent: a model, steps with their instructions and tools, a typed state.

    Run it as a policy (``runner.start(journey, message="hi")``): a whole
    conversation in one durable run. After each reply it waits for the next
    message, sent with ``runner.signal(run_id, "message", text)``, holding
    no memory or worker while it waits, until a tool calls
    :meth:`~stalwart.journey.ToolContext.finish`. Inside a policy of your own,
    :meth:`reply` answers one message.

    Args:
        model: Any model policy (``stalwart.llm.openai(...)``, a
            ``stalwart.testing.ScriptedLLM``...).
        steps: Each member of the steps ``Enum`` and its :class:`Step`.
        state: The pydantic model of the state; the journey starts with
            ``state()`` unless the first message comes with one.
        start: The first step.
        instructions: What every step's prompt begins with (who the agent is).
        name: The journey's policy name.
        max_rounds: The most model calls for one message. When they are
            spent, one more call with the tools withheld asks the model for a
            reply to the user: the user gets words, never a tool's raw output.
        signal: The signal the journey waits for between messages.
    """

    def __init__(
        self,
        model: Any,
        *,
        steps: Mapping[E, Step],
        state: type[S],
        start: E,
        instructions: str = "",
        name: str = "journey",
        max_rounds: int = 10,
        signal: str = "message",
    ) -> None:
        if start not in steps:
            raise ValueError(f"journey {name!r}: the start step {start!r} has no Step")
        kind = type(start)
        missing = [m.name for m in kind if m not in steps]
        if missing:
            raise ValueError(f"journey {name!r}: steps without a Step: {', '.join(missing)}")
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        fields = set(state.model_fields)
        for member, spec in steps.items():
            if isinstance(spec.instructions, str):
                _check_template(name, member, spec.instructions, fields)
        self.model = model
        self.steps: dict[E, Step] = dict(steps)
        self.kind: type[E] = kind
        self.state_type = state
        self.start = start
        self.instructions = instructions
        self.name = name
        self.max_rounds = max_rounds
        self.signal = signal
        self.options: dict[E, list[Policy[Any, Any]]] = {
            member: [offered(t) for t in spec.tools] for member, spec in steps.items()
        }
        for member, offer in self.options.items():
            names = [p.name for p in offer]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(
                    f"journey {name!r}: step {member.name} has several tools named "
                    f"{', '.join(twice)}"
                )
        declare_annotation(JourneyReply)  # read back on replay and as a run's outcome
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self, name=name, description=_first_line(instructions) or f"The {name} journey."
        )

    # -- as a policy: a whole conversation -------------------------------------------------
    async def __call__(
        self,
        ctx: Context,
        message: str,
        state: SkipJsonSchema[dict[str, Any] | None] = None,
    ) -> JourneyReply:
        """Hold the conversation: reply, wait for the next message, until the journey ends.

        Args:
            message: The user's first message.
            state: The state to start from (JSON of the state model).
        """
        reply = await self.reply(ctx, message, state=state)
        while not reply.done:
            ctx.emit({"journey": self.name, "reply": reply.text, "step": reply.step})
            answer = await ctx.wait_for(
                self.signal, prompt=reply.text, about={"journey": self.name, "step": reply.step}
            )
            reply = await self.reply(ctx, str(answer), after=reply)
        return reply

    # -- one message -----------------------------------------------------------------------
    async def reply(
        self,
        ctx: Context,
        message: str,
        *,
        after: JourneyReply | None = None,
        state: dict[str, Any] | None = None,
    ) -> JourneyReply:
        """Answer one message: model calls (and their tools) until the model replies.

        ``after`` is the previous reply of the conversation (its step, state
        and messages); ``state`` starts a new conversation from that state.
        """
        here = _Here(self, ctx, after, state)
        messages = here.messages
        messages.append(Message.user(message))
        for _ in range(self.max_rounds):
            out = await here.call_model(messages, self.options[here.step])
            messages.extend(out)
            await here.apply(out)
            if not any(m.action_call is not None for m in out):
                return here.reply(_text(out))
        # Out of model calls: one more, tools withheld, for a reply in words.
        note = Message.system(OUT_OF_ROUNDS)
        out = await here.call_model([*messages, note], None)
        messages.extend(m for m in out if m.action_call is None)
        text = _text(out) or (
            "I could not finish this within the steps allowed for one message. "
            "Tell me how you would like to go on."
        )
        return here.reply(text)

    # -- helpers -----------------------------------------------------------------------------
    def prompt(self, step: E, state: S) -> str:
        """The system prompt of ``step``, rendered from ``state``."""
        spec = self.steps[step].instructions
        text = spec(state) if callable(spec) else spec.format_map(dict(state))
        head = self.instructions.strip()
        return f"{head}\n\n{text.strip()}" if head else text.strip()

    def state_of(self, reply: JourneyReply) -> S:
        """The reply's state as the journey's state model."""
        return self.state_type.model_validate(reply.state)

    def step_of(self, reply: JourneyReply) -> E:
        """The reply's step as a member of the steps ``Enum``."""
        return self.kind[reply.step]

    def __repr__(self) -> str:
        steps = ", ".join(m.name for m in self.steps)
        return f"<Journey {self.name} steps=[{steps}]>"


class _Here(Generic[E, S]):
    """One message being answered: where the journey stands, and the tokens used."""

    def __init__(
        self,
        journey: Journey[E, S],
        ctx: Context,
        after: JourneyReply | None,
        state: dict[str, Any] | None,
    ) -> None:
        self.journey = journey
        self.ctx = ctx
        self.step: E = journey.step_of(after) if after is not None else journey.start
        start = after.state if after is not None else (state or {})
        self.state: S = journey.state_type.model_validate(start)
        self.messages: list[Message] = list(after.messages) if after is not None else []
        self.before = Usage.from_dict(after.total_usage) if after is not None else Usage()
        self.used = Usage()
        self.done = False

    async def call_model(
        self, messages: list[Message], options: list[Policy[Any, Any]] | None
    ) -> list[Message]:
        """One recorded model call, shown this step's prompt (rebuilt every call)."""
        j = self.journey
        observations = [Message.system(j.prompt(self.step, self.state)), *messages]
        where = Scope(
            j.name,
            self.step,
            self.state.model_dump(mode="json"),
            j.state_type,
            j.steps[self.step].moves,
        )
        token = scope().set(where)
        try:
            if options is None:
                raw = await self.ctx.call(j.model, observations=observations)
            else:
                raw = await self.ctx.call(j.model, observations=observations, options=options)
        finally:
            scope().reset(token)
        out = _as_messages(raw, j.model)
        # Every call counts, not only the last (and a sub-agent's tokens too).
        self.used += usage_of(m for m in out if m.action_result is None)
        for m in out:
            result = m.action_result
            if result is not None and isinstance(result.value, Message) and result.value.meta:
                self.used += Usage.from_dict(result.value.meta.get("agent_usage"))
        return out

    async def apply(self, out: list[Message]) -> None:
        """Apply what the tools changed, in call order, and record where the journey is."""
        changed = False
        for m in out:
            result = m.action_result
            if result is None or result.is_error or not isinstance(result.value, Message):
                continue
            effects = Effects.from_json((result.value.meta or {}).get(EFFECTS))
            if effects is None:
                continue
            changed = True
            if effects.fields:
                # A message's payload is read-only; the state is the tools' to change.
                merged = {**self.state.model_dump(mode="json"), **thaw(effects.fields)}
                self.state = self.journey.state_type.model_validate(merged)
            if effects.goto is not None:
                self.step = self.journey.kind[effects.goto]
            self.done = self.done or effects.finish
        if changed:
            await self._record()

    async def _record(self) -> None:
        """Record the journey's step and state as a step of the run (``stalwart.journey``).

        On replay the record answers, and the journey continues from it.
        """
        j = self.journey
        now = {
            "journey": j.name,
            "step": self.step.name,
            "state": self.state.model_dump(mode="json"),
            "done": self.done,
        }
        key = self.ctx.next_key()
        engine = self.ctx.engine
        seen = await engine.recorded(key, "journey", lambda: now)
        try:
            self.step = j.kind[seen["step"]]
            self.state = j.state_type.model_validate(seen["state"])
            self.done = seen["done"] is True
        except (KeyError, TypeError, ValidationError) as exc:
            raise engine.halt(
                CorruptedRecord(
                    f"run {engine.run_id!r}, step {key}: the journey record of {j.name!r} "
                    f"does not fit its steps and state: {exc}"
                )
            ) from exc

    def reply(self, text: str) -> JourneyReply:
        total = self.before + self.used
        return JourneyReply(
            text=text,
            step=self.step.name,
            state=self.state.model_dump(mode="json"),
            done=self.done,
            messages=list(self.messages),
            usage=self.used.to_dict(),
            total_usage=total.to_dict(),
        )


def _as_messages(raw: Any, model: Any) -> list[Message]:
    if isinstance(raw, Message):
        return [raw]
    if isinstance(raw, str):  # a plain function model that answers with text
        return [Message.assistant(raw, actor=as_policy(model).name)]
    if isinstance(raw, list) and all(isinstance(m, Message) for m in raw):
        return raw
    raise TypeError(f"the model must return a Message or a list of them, not {type(raw).__name__}")


def _text(out: Sequence[Message]) -> str:
    return "\n".join(
        m.text for m in out if m.action_result is None and m.action_call is None and m.text
    )


def _check_template(journey: str, step: Enum, template: str, fields: set[str]) -> None:
    """A template may only name the state's fields: fail at definition, not mid-run."""
    for _, name, _, _ in string.Formatter().parse(template):
        if name is None:
            continue
        root = name.split(".", 1)[0].split("[", 1)[0]
        if root not in fields:
            known = ", ".join(sorted(fields)) or "(none)"
            raise ValueError(
                f"journey {journey!r}, step {step.name}: the instructions name {{{name}}}, "
                f"which is not a field of the state ({known}); write {{{{ and }}}} for braces"
            )


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()
