"""A ready tool-calling agent: the common loop, as a policy.

The loop is the one every agent framework has: send the conversation and the
tools to the model, let the engine run the calls it makes, add the calls and
results to the conversation, and go on until the model answers without
calling anything. What Stalwart adds is that each model call and each tool
call is a recorded step, so an agent killed mid-run resumes by replay without
paying for a finished model call again, and that the agent is itself a
policy: a tool of another agent, or the root of a durable run.

Replay needs every model call to get the arguments it was recorded with, so
every decision the loop makes (when to compact, when the budget is spent) is
made from recorded data only: the replies and their usage, never a clock or a
counter kept in memory.

This module holds the agent and its loop; the pieces the loop consults live
beside it: the token budget (:mod:`._budget`), what the model is shown of a
long conversation (:mod:`._compaction`), the typed final answer
(:mod:`._output`), the checks its question, answer and tool calls must
pass (:mod:`._guardrails`), and handing the conversation to another agent
(:mod:`._handoffs`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, overload

from pydantic import ValidationError
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypeVar

from ..conversations import Followups, taking_followups
from ..conversations.ownership import owner_of, reporting_owner
from ..core.context import Context
from ..core.declared import declare_annotation
from ..core.errors import MaxRoundsExceeded, OutputValidationError
from ..core.message import Message, Text, plain
from ..core.policy import Approval, Policy, as_policy
from ._budget import Tally, inherited_budget, passing_down
from ._compaction import ContextPolicy
from ._guardrails import Guardrails
from ._handoffs import Handoff, Handoffs, Summary, handed_history, summary_request
from ._output import OUTPUT, OutputType, problems, repair_request, takes_output
from ._usage import Usage

if TYPE_CHECKING:
    from ..runner import Runner

__all__ = ["Agent"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# What the agent answers: its output type, else text.
OutputT = TypeVar("OutputT", default=str)


class BoundAgent(Protocol):
    """An agent bound on an application context: ``await ctx.researcher(question=...)``."""

    def __call__(self, question: str, history: list[Message] | None = None) -> Awaitable[Any]: ...


class Agent(Generic[OutputT]):
    """A tool-calling agent: a model, instructions and tools, in a loop, as a policy.

    ``Agent[Forecast]`` when its ``output_type`` is ``Forecast`` (type
    checkers infer it): ``await agent.run(...)`` is a ``Forecast``; else
    ``Agent[str]``.

    Args:
        model: Any policy that takes ``observations`` and ``options`` and
            returns messages: a provider (``stalwart.llm.openai(...)``), a
            model string (``"anthropic:claude-haiku-4-5"``), or
            ``stalwart.testing.ScriptedLLM``.
        instructions: The system prompt.
        tools: Policies the model may call. An :class:`Agent` among them is a
            sub-agent: the model asks it a question, and its token usage counts
            toward this agent's budget.
        name: The agent's name: its policy name, and its tool name when it is a
            sub-agent (letters, digits, ``_`` and ``-``). Default ``"agent"``,
            or, bound on an application context class, the attribute's name.
        description: What a model that may call this agent is told it does
            (default: the first paragraph of the instructions).
        max_rounds: The most model calls before :class:`MaxRoundsExceeded`.
        output_type: A pydantic model (or any type pydantic validates) the
            final answer must be, as JSON; the agent then returns an instance.
            A provider is asked for it in its own structured output mode
            when the type is a JSON object; other models, in the prompt.
            Define it at module level, so that a durable run can record it.
        max_repairs: How many times an answer that does not validate is sent
            back with the error before :class:`OutputValidationError`.
        context: A :class:`Window` or :class:`Compaction` (or any
            :class:`ContextPolicy`) for long runs.
        budget: The most tokens (input + output) the agent's model calls,
            and its sub-agents', may use; past it, the agent stops before
            its next model call with :class:`BudgetExceeded`.
        input_guardrails: Guardrails that read the question (after the
            history) before the agent answers: policies that take
            ``messages`` and return a :class:`Verdict`, or agents whose
            ``output_type`` is ``Verdict``. A trip ends the answer with
            :class:`GuardrailTripped`.
        output_guardrails: Guardrails that read the final answer (after the
            question) before it is returned.
        tool_guardrails: Guardrails that read each tool call the model
            makes, before the tool runs.
        concurrent_guardrails: Run the input guardrails beside the first
            model call instead of before it (its answer is discarded on a
            trip, and its tool calls wait for the verdict).
        handoffs: Agents this agent may hand the conversation to (an
            :class:`Agent`, the name of one declared elsewhere, or
            :class:`Handoff` for how the history is passed): its model is
            offered a ``transfer_to_<name>`` tool for each, and the agent it
            calls answers from then on (see :mod:`._handoffs`).
        approval: As a sub-agent (or an option), whether a model's call of
            it waits for a person to approve, deny or edit it first, as
            ``approval=`` of a policy says (docs/approvals.md): ``True``, or
            a rule of the call's ``question``.
        approval_timeout: How long, in seconds, such a call waits for a
            decision before it is denied (``approval_timeout=`` of a policy).
    """

    __stalwart_agent__ = True  # what _kinds.is_agent reads

    def __init__(
        self,
        model: Any,
        *,
        instructions: str = "",
        tools: Sequence[Any] = (),
        name: str | None = None,
        description: str | None = None,
        max_rounds: int = 20,
        output_type: type[OutputT] | None = None,
        max_repairs: int = 2,
        context: ContextPolicy | None = None,
        budget: int | None = None,
        input_guardrails: Sequence[Any] = (),
        output_guardrails: Sequence[Any] = (),
        tool_guardrails: Sequence[Any] = (),
        concurrent_guardrails: bool = False,
        handoffs: Sequence[Any] = (),
        approval: Approval = False,
        approval_timeout: float | None = None,
    ) -> None:
        given = name  # an unnamed agent bound on a context is named after its attribute
        name = name or "agent"
        _check_limits(name, max_rounds, max_repairs, budget)
        if isinstance(model, str):
            from ._model import model as from_string

            model = from_string(model)
        self.model = model
        self.instructions = instructions
        self.name = name
        self.description = description or _first_paragraph(instructions) or f"The {name} agent."
        self.max_rounds = max_rounds
        self.output_type = output_type
        declare_annotation(output_type)  # its answers are read back on replay
        self.max_repairs = max_repairs
        self.context = context
        self.budget = budget
        self._output = OutputType(output_type) if output_type is not None else None
        # Asked of each model call (``output=``) when the model has a mode for it.
        self._output_request = (
            self._output.request() if self._output is not None and takes_output(model) else None
        )
        self.tools = tuple(tools)
        # The policies offered to the model (``options=`` of each model call):
        # a sub-agent is offered as an _AgentTool, which reports its usage.
        self.options: list[Policy[Any, Any]] = [
            as_policy(_AgentTool(t) if isinstance(t, Agent) else t) for t in self.tools
        ]
        self._sub_agents = {t.name for t in self.tools if isinstance(t, Agent)}
        self.handoffs = Handoffs(name, handoffs) if handoffs else None
        if self.handoffs is not None:
            self.options += self.handoffs.tools
        names = [p.name for p in self.options]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"agent {name!r} has several tools named {', '.join(twice)}")
        if self.handoffs is not None:
            Handoffs.graph(self, resolve=False)  # two agents it reaches never share a name
        self.guardrails = Guardrails.of(
            name, input_guardrails, output_guardrails, tool_guardrails, concurrent_guardrails
        )
        if self.guardrails is not None:  # tool calls go through its gates
            self.options = self.guardrails.gated(self.options)
        # The policy runs the loop (_Answer); ``await agent(question=...)``
        # goes through it, so that inside a run it is a recorded step, as
        # awaiting any policy is.
        self.approval = approval
        self.approval_timeout = approval_timeout
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            _Answer(self),
            name=given,
            description=self.description,
            approval=approval,
            approval_timeout=approval_timeout,
        )

    # Bound on an application context class (``researcher = Agent(...)``),
    # ``ctx.researcher(question=...)`` is a step of this agent, and a type
    # checker sees that signature; on any other class, the agent itself.
    # The context class binds it when the class is made
    # (``Context.__init_subclass__``); this ``__get__`` only tells type
    # checkers so. A real one would make every instance a method descriptor,
    # which ``inspect.isroutine`` takes for a function.
    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: Context, owner: type | None = None) -> BoundAgent: ...
        @overload
        def __get__(self, obj: object, owner: type | None = None) -> Self: ...
        def __get__(self, obj: object, owner: type | None = None) -> Any: ...

    @functools.cached_property
    def system_prompt(self) -> str:
        """The instructions, and the output schema the final answer must follow."""
        parts = [self.instructions.strip()] if self.instructions.strip() else []
        if self._output is not None and self._output_request is None:
            parts.append(self._output.instructions())
        return "\n\n".join(parts)

    def __call__(self, question: str, history: list[Message] | None = None) -> Awaitable[OutputT]:
        """Ask the agent: ``await agent(question=...)``.

        Inside a run it is a recorded step of this agent, as awaiting any
        policy is (the same as ``await ctx.call(agent, question=...)``): a
        resumed run replays its answer without calling the model again.
        Outside any run, the agent runs alone, in memory.

        Args:
            question: The question or the task, with everything needed to do it.
            history: Earlier messages of the conversation, placed after the
                instructions and before the question.
        """
        if isinstance(question, Context):
            raise TypeError(
                f"agent {self.name!r} takes no context: write `await agent(question=...)` "
                "(a step of the current run) or `await ctx.call(agent, question=...)`"
            )
        if history is None:
            return self.__stalwart_policy__(question=question)
        return self.__stalwart_policy__(question=question, history=history)

    async def run(
        self,
        question: str,
        history: list[Message] | None = None,
        *,
        runner: Runner | None = None,
        run_id: str | None = None,
    ) -> OutputT:
        """Run the agent as a run of its own: in memory, or durably on ``runner``'s store.

        Inside a run, await the agent as a step instead:
        ``await agent(question=...)``.
        """
        from ..runner import Runner

        runner = runner if runner is not None else Runner()
        return await runner.run(self, question=question, history=history, run_id=run_id)

    def __stalwart_version__(self) -> list[Any]:
        """What decides the steps of this agent's runs, for its code version
        (:mod:`stalwart.runner.versions`): its model, instructions, output
        type, limits, tools, guardrails and handoffs."""
        return [
            "model", self.model,
            "instructions", self.instructions,
            "output", self.output_type,
            "limits", self.max_rounds, self.max_repairs, self.budget,
            "context", self.context,
            "tools", list(self.tools),
            "guardrails", self.guardrails,
            "handoffs", self.handoffs,
        ]  # fmt: skip

    def __repr__(self) -> str:
        tools = ", ".join(p.name for p in self.options)
        model = getattr(self.model, "name", self.model)
        return f"<Agent {self.name} model={model!r} tools=[{tools}]>"


class _Answer:
    """What an agent's policy runs: one answer of the agent, in the step's context."""

    def __init__(self, agent: Agent[Any]) -> None:
        self.agent = agent
        self.name = agent.name

    async def __call__(
        self,
        ctx: Context,
        question: str,
        history: SkipJsonSchema[list[Message] | None] = None,
    ) -> Any:
        """Answer the question, or carry out the task, calling the tools as needed.

        Args:
            question: The question or the task, with everything needed to do it.
            history: Earlier messages of the conversation, placed after the
                instructions and before the question.
        """
        # In a conversation with followups="inject", turns that arrive meanwhile
        # join it before each model call (stalwart/conversations/followups.py).
        agent = self.agent
        with taking_followups() as followups:
            if agent.handoffs is None:
                answer, _ = await _Loop(agent, ctx, followups).run(question, history)
                return answer
            # The agent that last received the conversation answers (named by
            # the history), and a conversation is told who holds it now.
            with reporting_owner() as report:
                team = agent.handoffs.team(agent)
                loop = _Loop(team.get(owner_of(history), agent), ctx, followups, team)
                answer, _ = await loop.run(question, history)
                if report is not None:
                    report(loop.handed_to)
        return answer

    def __repr__(self) -> str:
        return repr(self.agent)

    def __stalwart_version__(self) -> list[Any]:
        return [self.agent]


class _AgentTool:
    """An agent offered to another agent's model: it answers with text and its usage.

    The answer is a message whose text the calling model reads and whose
    ``meta["agent_usage"]`` the calling agent adds to its budget. It is the
    recorded result of the tool step, so a replayed run counts the same
    tokens without running the sub-agent again. (``"usage"`` would count the
    sub-agent's model calls twice in :func:`run_usage`.)
    """

    def __init__(self, agent: Agent[Any]) -> None:
        self.agent = agent
        self.name = agent.name
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self,
            name=agent.name,
            description=agent.description,
            approval=agent.approval,  # a model's call of the sub-agent may wait for a person
            approval_timeout=agent.approval_timeout,
        )

    async def __call__(self, ctx: Context, question: str) -> Message:
        """Ask this agent.

        Args:
            question: The question or the task, with everything the agent needs to
                know: it does not see your conversation.
        """
        answer, used = await _Loop(self.agent, ctx).run(question, None)
        text = answer if isinstance(answer, str) else json.dumps(plain(answer), ensure_ascii=False)
        return Message(
            "assistant", self.agent.name, (Text(text),), meta={"agent_usage": used.to_dict()}
        )


class _Loop:
    """One invocation of an agent: its conversation, rounds and tokens."""

    def __init__(
        self,
        agent: Agent[Any],
        ctx: Context,
        followups: Followups | None = None,
        team: dict[str, Agent[Any]] | None = None,
    ) -> None:
        self.agent = agent  # the agent answering: another one after a handoff
        self.ctx = ctx
        self.followups = followups
        self.tally = Tally(agent.budget, inherited_budget())
        self.team = team  # the agents it may hand to, by name
        self.handed_to: str | None = None  # the agent it last handed to

    # -- model calls ---------------------------------------------------------------------
    async def call_model(
        self,
        observations: list[Message],
        *,
        model: Any = None,
        options: list[Policy[Any, Any]] | None = None,
        output: dict[str, Any] | None = None,
    ) -> list[Message]:
        """One recorded model call (and, with options, the tool calls it makes;
        with ``output``, in the model's structured output mode)."""
        self.tally.check(self.agent.name)
        target = model if model is not None else self.agent.model
        observations = list(observations)  # the loop goes on extending its own list
        extra = {} if output is None else {OUTPUT: output}  # recorded after the others
        if options is None:
            raw = await self.ctx.call(target, observations=observations, **extra)
        else:
            with passing_down(self.tally.left):
                raw = await self.ctx.call(
                    target, observations=observations, options=options, **extra
                )
        out = self._messages(raw, target)
        self.tally.count(out, self.agent.name, self.agent._sub_agents)
        return out

    def _messages(self, raw: Any, target: Any) -> list[Message]:
        if isinstance(raw, Message):
            return [raw]
        if isinstance(raw, str):  # a plain function model that answers with text
            actor = getattr(as_policy(target), "name", "assistant")
            return [Message("assistant", actor, (Text(raw),))]
        if isinstance(raw, list) and all(isinstance(m, Message) for m in raw):
            return raw
        raise TypeError(
            f"agent {self.agent.name!r}: the model must return a Message or a list of them, "
            f"not {type(raw).__name__}"
        )

    # -- the loop ------------------------------------------------------------------------
    async def run(self, question: str, history: Sequence[Message] | None) -> tuple[Any, Usage]:
        """Rounds until the model answers without calling a tool (and the answer
        validates, when the agent has an output type); the answer and the tokens used."""
        agent = asked = self.agent
        guards = agent.guardrails  # None without guardrails: nothing more is done
        if guards is not None:
            await guards.check_input(self.ctx, question, history)
        messages = self._opening(question, history)
        rounds = repairs = 0
        while True:
            if rounds >= asked.max_rounds:  # handoffs included: a cycle ends here
                raise MaxRoundsExceeded(self._out_of_rounds(messages, asked))
            if self.followups is not None:  # recorded receives: replay adds the same
                messages.extend(await self.followups(self.ctx))
            if agent.context is not None:
                messages = list(await agent.context(messages, self.call_model))
            request = agent._output_request
            if guards is None:
                out = await self.call_model(messages, options=agent.options, output=request)
            elif rounds == 0:
                call = functools.partial(
                    self.call_model, messages, options=agent.options, output=request
                )
                out = await guards.first_call(self.ctx, question, history, call)
            else:
                out = await guards.call(
                    self.call_model(messages, options=agent.options, output=request)
                )
            rounds += 1
            messages.extend(out)
            if any(m.action_call is not None for m in out):
                handoff = agent.handoffs.requested(out) if agent.handoffs is not None else None
                if handoff is not None:
                    messages = await self._hand_off(handoff, messages, question)
                    agent = self.agent
                    guards = agent.guardrails  # the receiving agent's own checks
                continue
            text = "\n".join(m.text for m in out if m.action_result is None and m.text)
            if agent._output is None:
                if guards is not None:
                    await guards.check_output(self.ctx, question, out)
                return text, self.tally.used
            try:
                answer = agent._output.read(text)
            except ValidationError as exc:
                found = problems(exc)
                if repairs >= agent.max_repairs:
                    raise OutputValidationError(
                        f"agent {agent.name!r}: the final answer does not validate against "
                        f"{agent._output.name} after {repairs} repair(s): {found}"
                        f"\nlast answer: {text[:1000]}"
                    ) from None
                repairs += 1
                messages.append(Message.user(repair_request(found), actor="validator"))
                continue
            if guards is not None:
                await guards.check_output(self.ctx, question, out)
            return answer, self.tally.used

    async def _hand_off(
        self, handoff: Handoff, messages: list[Message], question: str
    ) -> list[Message]:
        """Record the handoff the model asked for (a summary first, when the
        history is passed summarized) and go on with the receiving agent:
        its instructions, then the conversation as the handoff passes it."""
        source = self.agent
        assert source.handoffs is not None
        if self.team is None:  # a sub-agent that hands off: its own team
            self.team = source.handoffs.team(source)
        target = self.team[handoff.name]
        summary: list[Message] = []
        if isinstance(handoff.history, Summary):
            asked = summary_request(messages, handoff.history)
            summary = await self.call_model(asked, model=handoff.history.model)
        how = handoff.history if isinstance(handoff.history, str) else "summary"
        await self.ctx.call(source.handoffs.steps[handoff.name], history=how)
        self.agent, self.handed_to = target, target.name
        opening = [Message.system(target.system_prompt)] if target.system_prompt else []
        return opening + handed_history(messages, handoff, question, summary)

    def _opening(self, question: str, history: Sequence[Message] | None) -> list[Message]:
        """The instructions, the earlier conversation, then the question."""
        messages: list[Message] = []
        if self.agent.system_prompt:
            messages.append(Message.system(self.agent.system_prompt))
        messages.extend(history or ())
        messages.append(Message.user(question))
        return messages

    def _out_of_rounds(self, messages: list[Message], asked: Agent) -> str:
        last = [m.action_call.name for m in messages[-20:] if m.action_call is not None]
        called = f"; its last rounds called {', '.join(last[-5:])}" if last else ""
        handed = f" (handed to {self.agent.name!r} on the way)" if self.agent is not asked else ""
        return (
            f"agent {asked.name!r} used its {asked.max_rounds} rounds "
            f"(max_rounds) without giving a final answer{handed}{called}"
        )


# -- helpers -------------------------------------------------------------------------


def _check_limits(name: str, max_rounds: int, max_repairs: int, budget: int | None) -> None:
    if not _NAME.match(name):
        raise ValueError(
            f"agent name {name!r} must be 1 to 64 letters, digits, '_' or '-' "
            "(it is a tool name when the agent is a sub-agent)"
        )
    if max_rounds < 1:
        raise ValueError("max_rounds must be at least 1")
    if max_repairs < 0:
        raise ValueError("max_repairs must be at least 0")
    if budget is not None and budget < 1:
        raise ValueError("budget must be a positive number of tokens")


def _first_paragraph(text: str) -> str:
    return text.strip().split("\n\n", 1)[0].strip()
