"""Handoffs: an agent hands the conversation to another agent, which owns it from then on.

``Agent(..., handoffs=[billing, refunds])`` offers the model one tool per
target (``transfer_to_billing``). When the model calls one, the agent's loop
(:mod:`.agent`) records a **handoff step**, named
``stalwart.handoff:triage>billing``, and goes on with the receiving agent:
its instructions, tools, handoffs and model, over the conversation so far
passed as the handoff says (:data:`HandoffHistory`: whole, without tool
calls, or a summary written by a recorded model call). The receiving agent
answers the current question, and, in a :class:`~stalwart.Conversation`, owns
the following turns (see :mod:`stalwart.conversations.ownership`).

Everything is decided from recorded data: which handoff the model asked for
is in its recorded reply, the summary is a recorded model call, and the
owner of a later turn is read from the history. A replay re-derives the same
owner without calling any model again.

An agent may hand to an agent declared after it by name
(``handoffs=["triage"]``: handing back); a name is resolved among the agents
reachable from the agent asked (:meth:`Handoffs.graph`), never imported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..conversations.ownership import handoff_step_name
from ..core.message import Message
from ..core.policy import Policy
from ._compaction import SUMMARY_HEADER, transcript
from ._kinds import is_agent

if TYPE_CHECKING:
    from .agent import Agent

__all__ = [
    "HANDOFF_SUMMARY_PROMPT",
    "Handoff",
    "HandoffHistory",
    "Handoffs",
    "Summary",
    "handed_history",
    "summary_request",
]

HANDOFF_SUMMARY_PROMPT = (
    "Another agent takes over this conversation from you. Summarize it for that agent: "
    "what the user wants, every fact, number, name and decision it needs, what was "
    "already done and what is still open. Write only the summary."
)


@dataclass(frozen=True)
class Summary:
    """Pass a summary of the conversation, written by ``model`` (the handing
    agent's by default) in a recorded model call, then the current question."""

    model: Any = None
    prompt: str = HANDOFF_SUMMARY_PROMPT


#: How the conversation is passed to the receiving agent: ``"whole"`` (every
#: message but the instructions), ``"without_tools"`` (without tool calls and
#: their results), or a :class:`Summary`.
HandoffHistory: TypeAlias = Literal["whole", "without_tools"] | Summary


class Handoff:
    """A handoff target, with how the conversation is passed to it.

    ``agent`` is an :class:`~stalwart.llm.Agent`, or the name of one reachable
    from the agent asked (to hand back to an agent declared later).
    ``description`` is what the model is told the target does (default: the
    target agent's description). An agent given bare in ``handoffs=[...]`` is
    ``Handoff(agent)``.
    """

    def __init__(
        self,
        agent: Agent[Any] | str,
        *,
        history: HandoffHistory = "whole",
        description: str | None = None,
    ) -> None:
        if not isinstance(history, Summary) and history not in ("whole", "without_tools"):
            raise ValueError(
                f"a handoff's history must be 'whole', 'without_tools' or llm.Summary(...), "
                f"not {history!r}"
            )
        self.agent = agent
        self.name: str = agent if isinstance(agent, str) else agent.name
        self.history = history
        given = description or (None if isinstance(agent, str) else agent.description)
        self.description = given or f"The {self.name} agent."

    @property
    def tool_name(self) -> str:
        """The tool the model calls to hand to this target."""
        return f"transfer_to_{self.name}"

    def __repr__(self) -> str:
        return f"Handoff({self.name!r}, history={self.history!r})"


class _Transfer:
    """The tool a model calls to hand the conversation over (its result is what
    the model reads; the handoff itself is the step the loop records next)."""

    def __init__(self, target: str) -> None:
        self.target = target

    async def __call__(self) -> str:
        """Hand the conversation over."""
        return f"The conversation is handed to {self.target}."


class _Step:
    """The recorded handoff step: its name says who hands to whom, its inputs
    how the history is passed, and its output is the receiving agent's name."""

    def __init__(self, target: str) -> None:
        self.target = target

    async def __call__(self, history: str) -> str:
        """Hand the conversation to the target."""
        return self.target


class Handoffs:
    """An agent's declared handoffs: the tools its model is offered, and the
    recorded step of each."""

    def __init__(self, source: str, declared: Iterable[Any]) -> None:
        self.source = source
        self._team: dict[str, Agent[Any]] | None = None
        self.targets: dict[str, Handoff] = {}  # by tool name
        for i, d in enumerate(declared):
            named = is_agent(d) or isinstance(d, str)
            h = d if isinstance(d, Handoff) else Handoff(d) if named else None
            if h is None:
                raise TypeError(
                    f"agent {source!r}: handoffs[{i}] must be an llm.Agent, an agent's name "
                    f"or llm.Handoff(...), not {type(d).__name__}"
                )
            if h.name == source:
                raise ValueError(
                    f"agent {source!r}: handoffs[{i}] is an agent of the same name; "
                    "an agent cannot hand the conversation to itself"
                )
            if h.tool_name in self.targets:
                raise ValueError(
                    f"agent {source!r} has several handoffs to agents named {h.name!r}"
                )
            if len(h.tool_name) > 64:  # the providers' limit on a tool's name
                raise ValueError(
                    f"agent {source!r}: handoffs[{i}] names agent {h.name!r}, whose handoff "
                    f"tool {h.tool_name!r} is {len(h.tool_name)} characters, over the 64 "
                    "models accept: give the agent a name of at most 52 characters"
                )
            self.targets[h.tool_name] = h
        self.tools: list[Policy[Any, Any]] = [
            Policy(
                _Transfer(h.name),
                name=h.tool_name,
                description=f"Hand the conversation to {h.name}: {h.description}",
            )
            for h in self.targets.values()
        ]
        self.steps: dict[str, Policy[Any, Any]] = {
            h.name: Policy(_Step(h.name), name=handoff_step_name(source, h.name))
            for h in self.targets.values()
        }

    def __stalwart_version__(self) -> list[Any]:
        """Where it may hand the conversation, and how (a policy's code version):
        an agent named by a string counts by its name only."""
        parts: list[Any] = []
        for tool in sorted(self.targets):
            handoff = self.targets[tool]
            how = handoff.history
            history = [how] if isinstance(how, str) else ["summary", how.model, how.prompt]
            parts += [tool, handoff.agent, *history]
        return parts

    def requested(self, out: Sequence[Message]) -> Handoff | None:
        """The handoff a model's reply asked for: its first transfer call that
        ran (a call refused with an error result hands nothing over)."""
        for m in out:
            r = m.action_result
            if r is not None and not r.is_error and r.name in self.targets:
                return self.targets[r.name]
        return None

    def team(self, entry: Agent[Any]) -> dict[str, Agent[Any]]:
        """The agents a conversation entering at ``entry`` (whose handoffs these
        are) may pass between, by name (:meth:`graph`, worked out once)."""
        if self._team is None:
            self._team = Handoffs.graph(entry)
        return self._team

    @staticmethod
    def graph(entry: Agent[Any], *, resolve: bool = True) -> dict[str, Agent[Any]]:
        """The agents reachable from ``entry`` through handoffs, by name: two
        agents never one name, and (``resolve``) every name a handoff gives
        resolved among them."""
        found: dict[str, Agent[Any]] = {entry.name: entry}
        todo = [entry]
        named: list[tuple[str, str]] = []  # (source, target name) to resolve
        while todo:
            agent = todo.pop()
            if agent.handoffs is None:
                continue
            for h in agent.handoffs.targets.values():
                if isinstance(h.agent, str):
                    named.append((agent.name, h.agent))
                    continue
                seen = found.get(h.name)
                if seen is None:
                    found[h.name] = h.agent
                    todo.append(h.agent)
                elif seen is not h.agent:
                    raise ValueError(
                        f"agent {agent.name!r} hands off to an agent named {h.name!r}, "
                        f"but another agent reachable from {entry.name!r} has that name: "
                        "agents a conversation can pass between need distinct names"
                    )
        for source, target in named if resolve else ():
            if target not in found:
                raise ValueError(
                    f"agent {source!r} hands off to {target!r} by name, but no agent of that "
                    f"name is reachable from {entry.name!r} (reachable: {', '.join(sorted(found))})"
                )
        return found


def summary_request(messages: Sequence[Message], summary: Summary) -> list[Message]:
    """What the summarizing model is asked: the prompt and the conversation as text."""
    told = [m for m in messages if m.role != "system"]
    return [Message.system(summary.prompt), Message.user(transcript(told))]


def handed_history(
    messages: Sequence[Message],
    handoff: Handoff,
    question: str,
    summary: Sequence[Message] = (),
) -> list[Message]:
    """What the receiving agent is given of the conversation so far (after its
    own instructions): the messages as the handoff says, or the summary's text
    and the current question."""
    if isinstance(handoff.history, Summary):
        text = "\n".join(m.text for m in summary if m.action_call is None and m.text).strip()
        return [Message.user(SUMMARY_HEADER + text, actor="summary"), Message.user(question)]
    kept = [m for m in messages if m.role != "system"]
    if handoff.history == "without_tools":
        kept = [m for m in kept if m.action_call is None and m.action_result is None]
    return kept
