"""A ready tool-calling agent: the common loop, as a policy.

The loop is the one every agent framework has: send the conversation and the
tools to the model, let the runtime run the calls it makes, add the calls and
results to the conversation, and go on until the model answers without
calling anything. What Stalwart adds is that each model call and each tool
call is a recorded step, so an agent killed mid-run resumes by replay without
paying for a finished model call again, and that the agent is itself a
policy: a tool of another agent, or the root of a durable run.

Replay needs every model call to get the arguments it was recorded with, so
every decision the loop makes (when to compact, when the budget is spent) is
made from recorded data only: the replies and their usage, never a clock or a
counter kept in memory.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import TypeAdapter, ValidationError
from pydantic.json_schema import SkipJsonSchema

from ..core.context import Context
from ..core.declared import declare_annotation
from ..core.message import Message, Text, plain
from ..core.policy import Policy, as_policy
from ._errors import BudgetExceeded, MaxTurnsExceeded, OutputValidationError
from ._usage import Usage, usage_of

if TYPE_CHECKING:
    from ..runner import Runner

__all__ = ["Agent", "Compaction", "ContextPolicy", "ModelCall", "Window", "window"]

# What the enclosing agent has left of its token budget, seen by the agents it
# runs as tools (context variables reach the tasks the runtime starts for
# them). None: no enclosing budget. It is what was left as the enclosing
# agent's turn began: the usage of the model call that asked for the sub-agent
# is known to the agent only once the runtime has run the calls, and counting
# it earlier from live data would make a replay decide differently.
_BUDGET_LEFT: ContextVar[int | None] = ContextVar("stalwart_agent_budget_left", default=None)

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)```", re.S)


class ModelCall(Protocol):
    """The agent's model, called as a recorded step that counts toward the budget."""

    def __call__(
        self, observations: list[Message], *, model: Any = None
    ) -> Awaitable[list[Message]]: ...


class ContextPolicy(Protocol):
    """Decides what the conversation is before each model call.

    It gets the conversation and a way to call the model (for a summary), and
    returns the conversation to go on with. It must keep each tool call with
    its results, and should keep the instructions. :class:`Window` and
    :class:`Compaction` are the two given here.
    """

    def __call__(
        self, messages: list[Message], call_model: ModelCall
    ) -> Awaitable[list[Message]]: ...


# -- context management ------------------------------------------------------------


def safe_cut(messages: Sequence[Message], start: int) -> int:
    """The latest cut at or before ``start`` that separates no call from its results.

    ``messages[cut:]`` is then a tail in which every result has its call. A cut
    only ever moves earlier, so the tail keeps at least what was asked for:
    the newest results are what a model needs most.
    """
    called: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m.action_call is not None:
            called.setdefault(m.action_call.id, i)
    cut = max(0, min(start, len(messages)))
    while True:
        earliest = cut
        for m in messages[cut:]:
            result = m.action_result
            if result is not None:
                k = called.get(result.call_id)
                if k is not None and k < earliest:
                    earliest = k
        if earliest == cut:
            return cut
        cut = earliest


def _kept_head(messages: Sequence[Message], keep_first_user: bool) -> set[int]:
    """Indices always kept: every system message, and the task (the first user message)."""
    keep = {i for i, m in enumerate(messages) if m.role == "system"}
    if keep_first_user:
        first = next((i for i, m in enumerate(messages) if m.role == "user"), None)
        if first is not None:
            keep.add(first)
    return keep


def window(
    messages: Sequence[Message], last: int, *, keep_first_user: bool = True
) -> list[Message]:
    """The conversation cut to its last ``last`` messages, plus what must stay.

    System messages (the instructions) always stay, and so does the first user
    message (the task), unless ``keep_first_user`` is false. The cut moves
    earlier rather than separate a tool call from its results, so a few more
    than ``last`` may be kept. Order is preserved.
    """
    if last < 1:
        raise ValueError("a window keeps at least 1 message")
    keep = _kept_head(messages, keep_first_user)
    cut = safe_cut(messages, len(messages) - last)
    return [m for i, m in enumerate(messages) if i >= cut or i in keep]


class Window:
    """Send the model only the last ``last`` messages (see :func:`window`).

    Cheap and deterministic, but what falls out of the window is forgotten;
    :class:`Compaction` keeps a summary of it instead.
    """

    def __init__(self, last: int, *, keep_first_user: bool = True) -> None:
        if last < 1:
            raise ValueError("a window keeps at least 1 message")
        self.last = last
        self.keep_first_user = keep_first_user

    async def __call__(self, messages: list[Message], call_model: ModelCall) -> list[Message]:
        return window(messages, self.last, keep_first_user=self.keep_first_user)

    def __repr__(self) -> str:
        return f"Window(last={self.last})"


SUMMARY_PROMPT = (
    "You compact the transcript of an AI agent's work (its messages, the tools it "
    "called and what they returned) so that it can go on without the transcript. "
    "Write a concise summary that keeps every fact, number, name, decision and tool "
    "result the agent may still need, what it already tried, and what is still open. "
    "Write only the summary."
)
SUMMARY_HEADER = "Summary of the conversation so far:\n"


def transcript(messages: Sequence[Message], *, clip: int = 4000) -> str:
    """The messages as plain text for a summarizing model; long results are clipped."""
    lines: list[str] = []
    for m in messages:
        if m.action_call is not None:
            args = json.dumps(plain(m.action_call.arguments), ensure_ascii=False)
            lines.append(f"[{m.actor} called {m.action_call.name}({args})]")
        elif m.action_result is not None:
            text = m.text
            if len(text) > clip:
                text = text[:clip] + f" [... {len(text) - clip} more characters]"
            lines.append(f"[{m.action_result.name} returned] {text}")
        else:
            lines.append(f"{m.role} ({m.actor}): {m.text}")
    return "\n".join(lines)


class Compaction:
    """Replace the older part of a long conversation with a summary by the model.

    Due when the conversation has more than ``max_messages`` messages, or when
    the last model call read more than ``max_input_tokens`` tokens (its
    recorded usage, so a replay compacts at the same point). Then everything
    but the system messages, the first user message and the last ``keep_last``
    messages is summarized by ``model`` (the agent's by default) and replaced
    by one user message holding the summary. The cut never separates a tool
    call from its results; an earlier summary is folded into the next.
    """

    def __init__(
        self,
        *,
        max_messages: int | None = None,
        max_input_tokens: int | None = None,
        keep_last: int = 10,
        model: Any = None,
        prompt: str = SUMMARY_PROMPT,
    ) -> None:
        if max_messages is None and max_input_tokens is None:
            raise ValueError("say when to compact: max_messages=... or max_input_tokens=...")
        if keep_last < 1:
            raise ValueError("keep_last must be at least 1")
        if max_messages is not None and max_messages <= keep_last + 2:
            raise ValueError(
                "max_messages must exceed keep_last + 2 (the instructions and the task stay), "
                "or every turn would compact"
            )
        self.max_messages = max_messages
        self.max_input_tokens = max_input_tokens
        self.keep_last = keep_last
        self.model = model
        self.prompt = prompt

    def due(self, messages: Sequence[Message]) -> bool:
        if self.max_messages is not None and len(messages) > self.max_messages:
            return True
        if self.max_input_tokens is not None:
            for m in reversed(messages):
                if m.meta and "usage" in m.meta:
                    used = Usage.from_dict(m.meta["usage"]).input_tokens
                    return used > self.max_input_tokens
        return False

    async def __call__(self, messages: list[Message], call_model: ModelCall) -> list[Message]:
        if not self.due(messages):
            return messages
        keep = _kept_head(messages, True)
        cut = safe_cut(messages, len(messages) - self.keep_last)
        older = [m for i, m in enumerate(messages[:cut]) if i not in keep]
        if not older:
            return messages
        reply = await call_model(
            [Message.system(self.prompt), Message.user(transcript(older))], model=self.model
        )
        summary = "\n".join(m.text for m in reply if m.action_call is None and m.text).strip()
        head = [messages[i] for i in sorted(keep) if i < cut]
        note = Message.user(SUMMARY_HEADER + summary, actor="summary")
        return [*head, note, *messages[cut:]]

    def __repr__(self) -> str:
        return (
            f"Compaction(max_messages={self.max_messages}, "
            f"max_input_tokens={self.max_input_tokens}, keep_last={self.keep_last})"
        )


# -- the agent -----------------------------------------------------------------------


class Agent:
    """A tool-calling agent: a model, instructions and tools, in a loop, as a policy.

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
            sub-agent (letters, digits, ``_`` and ``-``).
        description: What a model that may call this agent is told it does
            (default: the first paragraph of the instructions).
        max_turns: The most model calls before :class:`MaxTurnsExceeded`.
        output_type: A pydantic model (or any type pydantic validates) the
            final answer must be, as JSON; the agent then returns an instance.
            Define it at module level, so that a durable run can record it.
        max_repairs: How many times an answer that does not validate is sent
            back with the error before :class:`OutputValidationError`.
        context: A :class:`Window` or :class:`Compaction` (or any
            :class:`ContextPolicy`) for long runs.
        budget: The most tokens (input + output) the agent's model calls,
            and its sub-agents', may use; past it, the agent stops before
            its next model call with :class:`BudgetExceeded`.
    """

    def __init__(
        self,
        model: Any,
        *,
        instructions: str = "",
        tools: Sequence[Any] = (),
        name: str = "agent",
        description: str | None = None,
        max_turns: int = 20,
        output_type: Any = None,
        max_repairs: int = 2,
        context: ContextPolicy | None = None,
        budget: int | None = None,
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(
                f"agent name {name!r} must be 1 to 64 letters, digits, '_' or '-' "
                "(it is a tool name when the agent is a sub-agent)"
            )
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if max_repairs < 0:
            raise ValueError("max_repairs must be at least 0")
        if budget is not None and budget < 1:
            raise ValueError("budget must be a positive number of tokens")
        if isinstance(model, str):
            from ._model import model as from_string

            model = from_string(model)
        self.model = model
        self.instructions = instructions
        self.name = name
        self.description = description or _first_paragraph(instructions) or f"The {name} agent."
        self.max_turns = max_turns
        self.output_type = output_type
        declare_annotation(output_type)  # its answers are read back on replay
        self.max_repairs = max_repairs
        self.context = context
        self.budget = budget
        self._adapter: TypeAdapter[Any] | None = (
            TypeAdapter(output_type) if output_type is not None else None
        )
        self.tools = tuple(tools)
        self.options: list[Policy[Any, Any]] = []
        self._sub_agents: set[str] = set()
        for tool in self.tools:
            if isinstance(tool, Agent):
                self.options.append(as_policy(_AgentTool(tool)))
                self._sub_agents.add(tool.name)
            else:
                self.options.append(as_policy(tool))
        names = [p.name for p in self.options]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"agent {name!r} has several tools named {', '.join(twice)}")
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self, name=name, description=self.description
        )

    @functools.cached_property
    def system_prompt(self) -> str:
        """The instructions, and the output schema the final answer must follow."""
        parts = [self.instructions.strip()] if self.instructions.strip() else []
        if self._adapter is not None:
            schema = json.dumps(self._adapter.json_schema(), ensure_ascii=False)
            parts.append(
                "Give your final answer as one JSON object and nothing else (no prose, "
                f"no code fence), valid against this JSON schema:\n{schema}"
            )
        return "\n\n".join(parts)

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
        answer, _ = await _Loop(self, ctx).run(question, history)
        return answer

    async def run(
        self,
        question: str,
        history: list[Message] | None = None,
        *,
        runner: Runner | None = None,
        run_id: str | None = None,
    ) -> Any:
        """Run the agent as a run of its own: in memory, or durably on ``runner``'s store.

        Inside a run, call the agent as a step instead:
        ``await ctx.call(agent, question=...)``.
        """
        from ..runner import Runner

        runner = runner if runner is not None else Runner()
        return await runner.run(self, question=question, history=history, run_id=run_id)

    def __repr__(self) -> str:
        tools = ", ".join(p.name for p in self.options)
        model = getattr(self.model, "name", self.model)
        return f"<Agent {self.name} model={model!r} tools=[{tools}]>"


class _AgentTool:
    """An agent offered to another agent's model: it answers with text and its usage.

    The answer is a message whose text the calling model reads and whose
    ``meta["agent_usage"]`` the calling agent adds to its budget. It is the
    recorded result of the tool step, so a replayed run counts the same
    tokens without running the sub-agent again. (``"usage"`` would count the
    sub-agent's model calls twice in :func:`run_usage`.)
    """

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.name = agent.name
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self, name=agent.name, description=agent.description
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


class _Tally:
    """Tokens used by one agent invocation, against its limit."""

    def __init__(self, own: int | None, inherited: int | None) -> None:
        limits = [x for x in (own, inherited) if x is not None]
        self.limit = min(limits) if limits else None
        self.inherited = inherited is not None and (own is None or inherited < own)
        self.used = Usage()

    @property
    def left(self) -> int | None:
        return None if self.limit is None else self.limit - self.used.total_tokens

    def check(self, agent: str) -> None:
        if self.limit is None or self.used.total_tokens <= self.limit:
            return
        if self.inherited:
            over = f"the {self.limit} tokens its caller had left of its budget"
        else:
            over = f"its budget of {self.limit}"
        raise BudgetExceeded(
            f"agent {agent!r} used {self.used.total_tokens} tokens "
            f"({self.used.input_tokens} in, {self.used.output_tokens} out), over {over}; "
            "it stopped before its next model call"
        )


class _Loop:
    """One invocation of an agent: its conversation, turns and tokens."""

    def __init__(self, agent: Agent, ctx: Context) -> None:
        self.agent = agent
        self.ctx = ctx
        self.tally = _Tally(agent.budget, _BUDGET_LEFT.get())

    # -- model calls ---------------------------------------------------------------------
    async def call_model(
        self,
        observations: list[Message],
        *,
        model: Any = None,
        options: list[Policy[Any, Any]] | None = None,
    ) -> list[Message]:
        """One recorded model call (and, with options, the tool calls it makes)."""
        self.tally.check(self.agent.name)
        target = model if model is not None else self.agent.model
        observations = list(observations)  # the loop goes on extending its own list
        if options is None:
            raw = await self.ctx.call(target, observations=observations)
        else:
            token = _BUDGET_LEFT.set(self.tally.left)
            try:
                raw = await self.ctx.call(target, observations=observations, options=options)
            finally:
                _BUDGET_LEFT.reset(token)
        out = self._messages(raw, target)
        self._count(out)
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
        agent = self.agent
        messages: list[Message] = []
        if agent.system_prompt:
            messages.append(Message.system(agent.system_prompt))
        messages.extend(history or ())
        messages.append(Message.user(question))
        turns = repairs = 0
        while True:
            if turns >= agent.max_turns:
                raise MaxTurnsExceeded(self._out_of_turns(messages))
            if agent.context is not None:
                messages = list(await agent.context(messages, self.call_model))
            out = await self.call_model(messages, options=agent.options)
            turns += 1
            messages.extend(out)
            if any(m.action_call is not None for m in out):
                continue
            text = "\n".join(m.text for m in out if m.action_result is None and m.text)
            if agent._adapter is None:
                return text, self.tally.used
            try:
                value = agent._adapter.validate_json(_json_text(text))
            except ValidationError as exc:
                problems = _problems(exc)
                if repairs >= agent.max_repairs:
                    raise OutputValidationError(
                        f"agent {agent.name!r}: the final answer does not validate against "
                        f"{_type_name(agent.output_type)} after {repairs} repair(s): {problems}"
                        f"\nlast answer: {text[:1000]}"
                    ) from None
                repairs += 1
                feedback = (
                    "Your final answer does not validate against the required JSON schema: "
                    f"{problems}. Answer again with only the corrected JSON object."
                )
                messages.append(Message.user(feedback, actor="validator"))
                continue
            return value, self.tally.used

    def _count(self, out: list[Message]) -> None:
        """Add the tokens of a model call, and of the sub-agents it ran, to the tally."""
        self.tally.used += usage_of(m for m in out if m.action_result is None)
        for m in out:
            result = m.action_result
            if result is None or result.name not in self.agent._sub_agents:
                continue
            if result.is_error:
                if result.error_type == "BudgetExceeded" and self.tally.limit is not None:
                    raise BudgetExceeded(
                        f"agent {self.agent.name!r} stopped: its sub-agent {result.name!r} "
                        f"ran out of budget ({result.error_message})"
                    )
            elif isinstance(result.value, Message) and result.value.meta:
                self.tally.used += Usage.from_dict(result.value.meta.get("agent_usage"))

    def _out_of_turns(self, messages: list[Message]) -> str:
        last = [m.action_call.name for m in messages[-20:] if m.action_call is not None]
        called = f"; its last turns called {', '.join(last[-5:])}" if last else ""
        return (
            f"agent {self.agent.name!r} used its {self.agent.max_turns} turns "
            f"(max_turns) without giving a final answer{called}"
        )


# -- helpers -------------------------------------------------------------------------


def _first_paragraph(text: str) -> str:
    return text.strip().split("\n\n", 1)[0].strip()


def _json_text(text: str) -> str:
    """The JSON in a final answer: a fenced block, or from the first brace to the last."""
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    s = text.strip()
    if s[:1] in ("{", "["):
        return s
    starts = [i for i in (s.find("{"), s.find("[")) if i >= 0]
    end = max(s.rfind("}"), s.rfind("]"))
    if starts and end > min(starts):
        return s[min(starts) : end + 1]
    return s


def _problems(exc: ValidationError) -> str:
    out = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(x) for x in err["loc"]) or "the answer"
        out.append(f"{where}: {err['msg']}")
    return "; ".join(out)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)
