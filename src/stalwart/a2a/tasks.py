"""A2A tasks as Stalwart runs, and the messages between them.

A task is a durable run. Its id is the run's id, made by the server from the
client's ``messageId`` (:func:`task_id_for`): a client that sends the same
message again (a retry after a timeout, after the server crashed) reaches the
same run, which the runner answers from its ledger or resumes where it
stopped. A task id a client sends later only looks a run up: it must name a
run this server made (:data:`TASK_PREFIX`) of the policy it serves, so it
never names what code runs, and never reaches another application's runs on
a shared store.

What a task says is read from the run's record (:func:`task_of`): status,
result, error, and for a run waiting for a signal the question it asked. So a
server that restarted answers ``tasks/get`` from the ledger alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf import json_format, struct_pb2
from pydantic_core import to_jsonable_python

import stalwart as sw
from stalwart.core import codec
from stalwart.core.ledger import ASKED, CHILDREN_WAIT, TERMINAL, RunRecord, StepRecord
from stalwart.core.mail import mail_filter

__all__ = [
    "CONTEXT_TAG",
    "RESULT_ARTIFACT",
    "TASK_PREFIX",
    "agent_message",
    "answer_uid",
    "arguments_of",
    "asked",
    "context_of",
    "new_context",
    "parts_of",
    "result_artifact",
    "signal_of",
    "state_of",
    "task_id_for",
    "task_of",
    "value_of",
]

TASK_PREFIX = "a2a-"
"""Every task id (run id) this server makes starts with it."""

CONTEXT_TAG = "a2a.context"
"""The run's tag that keeps the task's ``contextId``."""

RESULT_ARTIFACT = "result"
"""The id of the artifact that holds a finished run's result."""

#: The latest steps of a waiting run read for what it asks.
ASK_WINDOW = 50


def task_id_for(agent: str, message_id: str) -> str:
    """The task (run) id of the first message of a task: a hash of the
    served agent's name and the client's ``messageId``, so the same message
    again is the same task, and no client text reaches a run id."""
    if not message_id:
        raise ValueError("message.messageId is required: it names the task for retries")
    digest = hashlib.sha256(f"{agent}\0{message_id}".encode()).hexdigest()[:32]
    return f"{TASK_PREFIX}{digest}"


def answer_uid(task_id: str, message: Message) -> str | None:
    """The signal ``uid`` of a message answering task ``task_id``'s wait:
    made from its ``messageId``, so the same message sent again is the same
    answer (delivered once); none without a ``messageId``."""
    if not message.message_id:
        return None
    digest = hashlib.sha256(f"{task_id}\0{message.message_id}".encode()).hexdigest()[:32]
    return f"{TASK_PREFIX}answer-{digest}"


def context_of(rec: RunRecord) -> str:
    """The ``contextId`` the task was created with (its run's tag)."""
    if rec.tags:
        try:
            tags = json.loads(rec.tags)
        except ValueError:
            tags = {}
        value = tags.get(CONTEXT_TAG) if isinstance(tags, dict) else None
        if isinstance(value, str):
            return value
    return rec.id


def new_context(message_id: str) -> str:
    """The ``contextId`` of a task whose first message names none: made from
    its ``messageId``, so a retried message is in the same context."""
    return hashlib.sha256(f"context\0{message_id}".encode()).hexdigest()[:32]


def value_of(parts: Sequence[Part]) -> Any:
    """What a message's parts say, as one value: its data part's value when it
    has exactly one data part and no text, else its text parts joined."""
    data = [p for p in parts if p.WhichOneof("content") == "data"]
    texts = [p.text for p in parts if p.WhichOneof("content") == "text"]
    if len(data) == 1 and not texts:
        return json_format.MessageToDict(data[0].data)
    if data:
        return [json_format.MessageToDict(p.data) for p in data] + texts
    return "\n".join(texts)


def arguments_of(pol: sw.Policy[Any, Any], message: Message) -> dict[str, Any]:
    """The policy's arguments from a task's first message, validated by the
    policy: a data part that is an object gives them by name; text goes to
    the policy's one required parameter (an agent's ``question``). Anything
    else is a ValueError naming the field."""
    value = value_of(message.parts)
    props = pol.parameters.get("properties", {})
    required = list(pol.parameters.get("required", []))
    if isinstance(value, dict):
        given = value
    elif isinstance(value, str):
        if len(required) != 1:
            names = ", ".join(required or list(props)) or "(none)"
            raise ValueError(
                f"message.parts: {pol.name!r} takes the arguments {names}; send them as "
                "one data part (a JSON object), not text"
            )
        if not value:
            raise ValueError("message.parts: the message has no text and no data part")
        given = {required[0]: value}
    else:
        raise ValueError(
            "message.parts: send one text part, or one data part holding the arguments "
            "as a JSON object"
        )
    try:
        return pol.validate(dict(given))
    except sw.ArgumentError as exc:
        raise ValueError(f"message.parts: {exc}") from None


def parts_of(value: Any) -> list[Part]:
    """A value as message parts: text as text, a message as its text, anything
    else as one data part of its JSON."""
    if isinstance(value, str):
        return [Part(text=value)]
    if isinstance(value, sw.Message) and value.text:
        return [Part(text=value.text)]
    data = struct_pb2.Value()
    json_format.ParseDict(to_jsonable_python(value, fallback=str), data)
    return [Part(data=data)]


def agent_message(task_id: str, context_id: str, value: Any, message_id: str) -> Message:
    """A message from the agent about a task."""
    return Message(
        message_id=message_id,
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_AGENT,
        parts=parts_of(value),
    )


def signal_of(rec: RunRecord) -> str | None:
    """The signal a suspended run waits for (not a timer, its child runs or mail)."""
    name = rec.waiting_for
    if rec.status != "suspended" or not name or name.startswith(CHILDREN_WAIT):
        return None
    if mail_filter(name) is not None:  # a receive: mail from another run, not input
        return None
    return name


def asked(steps: Sequence[StepRecord], signal: str) -> str | None:
    """What the latest wait for ``signal`` asks (``ctx.ask``, ``wait_for(prompt=)``)."""
    prompt: str | None = None
    latest = (-1.0, "")
    for step in steps:
        if step.name != f"stalwart.{ASKED}" or step.output is None or step.error is not None:
            continue
        try:
            value = json.loads(step.output)
        except (ValueError, RecursionError):
            continue
        if not isinstance(value, Mapping) or value.get("signal") != signal:
            continue
        if (step.finished_at, step.key) >= latest:
            latest = (step.finished_at, step.key)
            found = value.get("prompt")
            prompt = found if isinstance(found, str) else None
    return prompt


_STATES: dict[str, TaskState] = {
    "pending": TaskState.TASK_STATE_SUBMITTED,
    "running": TaskState.TASK_STATE_WORKING,
    "suspended": TaskState.TASK_STATE_WORKING,
    "succeeded": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}


def state_of(rec: RunRecord, waiter: RunRecord | None = None) -> TaskState:
    """The task's state: ``rec``'s, or ``input-required`` while ``waiter``
    (the run whose wait is the task's: ``rec`` itself, or its conversation)
    waits for a signal."""
    if rec.status not in TERMINAL and signal_of(waiter or rec) is not None:
        return TaskState.TASK_STATE_INPUT_REQUIRED
    return _STATES.get(rec.status, TaskState.TASK_STATE_WORKING)


def _error_text(rec: RunRecord) -> str:
    if not rec.error:
        return f"the run ended {rec.status}"
    try:
        data = json.loads(rec.error)
    except ValueError:
        return rec.error
    if isinstance(data, dict):
        return f"{data.get('type', 'Error')}: {data.get('message', '')}"
    return str(data)


def result_artifact(value: Any) -> Artifact:
    """The artifact of a finished run's result."""
    return Artifact(artifact_id=RESULT_ARTIFACT, name=RESULT_ARTIFACT, parts=parts_of(value))


async def task_of(
    runner: sw.Runner,
    rec: RunRecord,
    *,
    context_id: str | None = None,
    waiter: RunRecord | None = None,
) -> Task:
    """The task a run is, read from its record (and, while ``waiter``, the
    run whose wait is the task's, waits for a signal, that run's latest
    steps): what ``tasks/get`` answers, also after a restart."""
    context_id = context_id or context_of(rec)
    waiter = waiter or rec
    state = state_of(rec, waiter)
    status = TaskStatus(state=state)
    status.timestamp.FromNanoseconds(int(max(rec.updated_at, waiter.updated_at) * 1e9))
    task = Task(id=rec.id, context_id=context_id)
    mid = f"{rec.id}-status-{rec.status}"
    if state == TaskState.TASK_STATE_COMPLETED and rec.result is not None:
        value = codec.loads(rec.result, f"result of run {rec.id!r}")
        task.artifacts.append(result_artifact(value))
    elif state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED):
        text = _error_text(rec)
        status.message.CopyFrom(agent_message(rec.id, context_id, text, mid))
    elif state == TaskState.TASK_STATE_INPUT_REQUIRED:
        signal = signal_of(waiter) or ""
        prompt = asked((await runner.step_page(waiter.id, ASK_WINDOW)).steps, signal)
        text = prompt or f"the task waits for an answer (signal {signal!r})"
        status.message.CopyFrom(agent_message(rec.id, context_id, text, f"{mid}-{signal}"))
    task.status.CopyFrom(status)
    return task
