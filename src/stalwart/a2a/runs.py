"""The runs behind a served agent's tasks: a run of its own per task, or a
turn of a conversation per task.

- :class:`PolicyRuns` (a policy, an ``llm.Agent``): each task is one run of
  the served policy; its ``contextId`` is the run's tag.
- :class:`ConversationRuns` (``conversation=True``): each ``contextId`` is a
  durable conversation with the agent (:class:`~stalwart.conversations.Conversation`),
  and each task one of its turns, so the agent answers a message with the
  context's earlier messages as its history. The conversation's run is where
  the agent works, so its events are the task's, and its waits for a signal
  are the task's ``input-required``.

Either way a task id is a run id this server made (:data:`.tasks.TASK_PREFIX`),
checked against what it serves before anything is read (:meth:`owns`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from typing import Any, Protocol

from a2a.types import Message

import stalwart as sw
from stalwart.conversations import Conversation, conversation_policies
from stalwart.conversations.turn import turn
from stalwart.core import codec
from stalwart.core.ledger import TERMINAL, RunRecord
from stalwart.core.policy import as_policy
from stalwart.core.tags import check_tags

from .tasks import (
    CONTEXT_TAG,
    TASK_PREFIX,
    arguments_of,
    context_of,
    new_context,
    task_id_for,
    value_of,
)

__all__ = ["CONVERSATION_PREFIX", "ConversationRuns", "PolicyRuns", "TaskRuns"]

CONVERSATION_PREFIX = f"{TASK_PREFIX}ctx-"
"""Every conversation (run id) a conversation server makes starts with it."""

_TURN = "~turn-"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


class TaskRuns(Protocol):
    """What a task is made of, for :class:`~.server.TaskHandler`."""

    name: str

    async def start(self, message: Message, queue: asyncio.Queue[Any]) -> str:
        """Start the task ``message`` begins (``queue`` hears its events from
        the first); its id. A ValueError names the field at fault."""
        ...

    def owns(self, rec: RunRecord) -> bool:
        """Whether ``rec`` is a task of this server."""
        ...

    async def waiter(self, rec: RunRecord) -> RunRecord:
        """The run whose wait for a signal is the task's ``input-required``."""
        ...

    def watched(self, rec: RunRecord) -> str:
        """The run whose events are the task's."""
        ...

    def context(self, rec: RunRecord) -> str:
        """The task's ``contextId``."""
        ...

    def listing(self, context_id: str) -> dict[str, Any]:
        """``Runner.list_runs`` filters of the tasks (in ``context_id``, if given)."""
        ...


class PolicyRuns:
    """One run of ``target`` per task."""

    def __init__(self, target: Any, runner: sw.Runner) -> None:
        self.policy = runner.register(target)
        self.name = self.policy.name
        self.runner = runner

    async def start(self, message: Message, queue: asyncio.Queue[Any]) -> str:
        kwargs = arguments_of(self.policy, message)
        run_id = task_id_for(self.name, message.message_id)
        context = message.context_id or new_context(message.message_id)
        tags = check_tags({CONTEXT_TAG: context}, "message.contextId")
        self.runner.listen(run_id, queue)
        try:
            await self.runner.start(self.policy, run_id=run_id, tags=tags, **kwargs)
        except BaseException:
            self.runner.unlisten(run_id, queue)
            raise
        return run_id

    def owns(self, rec: RunRecord) -> bool:
        return rec.id.startswith(TASK_PREFIX) and rec.policy == self.name

    async def waiter(self, rec: RunRecord) -> RunRecord:
        return rec

    def watched(self, rec: RunRecord) -> str:
        return rec.id

    def context(self, rec: RunRecord) -> str:
        return context_of(rec)

    def listing(self, context_id: str) -> dict[str, Any]:
        tags = {CONTEXT_TAG: context_id} if context_id else None
        return {"policy": self.name, "id_contains": TASK_PREFIX, "tags": tags}


class ConversationRuns:
    """A conversation with ``agent`` per ``contextId``, a turn of it per task."""

    def __init__(self, agent: Any, runner: sw.Runner) -> None:
        loop, _ = (runner.register(p) for p in conversation_policies(agent))
        self.agent = agent
        self.name = as_policy(agent).name
        self.loop_name = loop.name
        self.runner = runner

    def _conversation_id(self, context: str) -> str:
        return f"{CONVERSATION_PREFIX}{_digest(self.name, context)}"

    async def start(self, message: Message, queue: asyncio.Queue[Any]) -> str:
        if not message.message_id:
            raise ValueError("message.messageId is required: it names the task for retries")
        value = value_of(message.parts)
        text = value if isinstance(value, str) else codec.dumps(value, "message.parts")
        if not text:
            raise ValueError("message.parts: the message has no text and no data part")
        context = message.context_id or new_context(message.message_id)
        check_tags({CONTEXT_TAG: context}, "message.contextId")
        mid = _digest(self.name, message.message_id)
        # The message's id is the turn's, so a retried message is the same turn.
        said = dataclasses.replace(sw.Message.user(text), id=mid, meta={CONTEXT_TAG: context})
        cid = self._conversation_id(context)
        self.runner.listen(cid, queue)
        try:
            handle = await Conversation(self.runner, self.agent, cid).put(said, message_id=mid)
        except BaseException:
            self.runner.unlisten(cid, queue)
            raise
        return handle.run_id

    def owns(self, rec: RunRecord) -> bool:
        """A turn of this agent's conversation for the turn's context (the
        turn policy is every agent's: its conversation says whose it is)."""
        if not (
            rec.id.startswith(CONVERSATION_PREFIX) and _TURN in rec.id and rec.policy == turn.name
        ):
            return False
        return self.watched(rec) == self._conversation_id(self.context(rec))

    async def waiter(self, rec: RunRecord) -> RunRecord:
        if rec.status in TERMINAL:
            return rec
        return await self.runner.get_run(self.watched(rec))

    def watched(self, rec: RunRecord) -> str:
        return rec.id.partition(_TURN)[0]

    def context(self, rec: RunRecord) -> str:
        """The context kept in the turn's message (its ``meta``)."""
        try:
            inputs = codec.loads(rec.inputs, f"inputs of run {rec.id!r}")
        except sw.StalwartError:
            return self.watched(rec)
        args = inputs.get("args") if isinstance(inputs, dict) else None
        said = args[1] if isinstance(args, list) and len(args) > 1 else None
        meta = said.meta if isinstance(said, sw.Message) else None
        value = meta.get(CONTEXT_TAG) if meta else None
        return value if isinstance(value, str) else self.watched(rec)

    def listing(self, context_id: str) -> dict[str, Any]:
        where = self._conversation_id(context_id) if context_id else CONVERSATION_PREFIX
        return {"policy": turn.name, "id_contains": where}
