"""What the model is shown of a long conversation: a window, or a summary.

An agent's conversation grows with every round; a context policy decides,
before each model call, what of it the model reads. :class:`Window` keeps the
last messages; :class:`Compaction` has the model summarize the older part.
Both keep each tool call with its results and decide from recorded data only
(the messages, and the usage recorded with the model's replies), so a
replayed run cuts and summarizes at the same points and its model calls get
the arguments they were recorded with.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from ..core.message import Message, plain
from ._usage import Usage

__all__ = [
    "SUMMARY_HEADER",
    "SUMMARY_PROMPT",
    "Compaction",
    "ContextPolicy",
    "ModelCall",
    "Window",
    "safe_cut",
    "transcript",
    "window",
]


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
                "or every round would compact"
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
