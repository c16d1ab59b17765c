"""A remote A2A agent as a tool: ``remote_agent(url, name=...)``.

The tool is a policy (``question: str``) a model can be offered, or a run can
await. Durability, in three rules:

- Each message sent to the remote agent is a recorded step of its own
  (``<name>_send``), whose result is what the remote task said: its id, its
  state, its answer or its question. A resumed run answers a finished send
  from the ledger and never sends it again.
- A send that was in flight when the process died is sent again on resume
  with the same ``messageId``: the step's idempotency key, the same on every
  execution of that step. A server that dedupes by ``messageId`` (a
  Stalwart server does: the same message is the same task) answers the
  retry with the task the first send started.
- A remote task that asks for input (``input-required``) becomes a durable
  wait of the calling run (``ctx.wait_for``, its prompt the remote agent's
  question): the run suspends, holding nothing, until someone sends the
  signal; the answer then goes to the remote task as the next message.

The URL and the headers stay in the tool: nothing of them reaches the ledger.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from typing import Any

import httpx
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from google.protobuf import json_format, struct_pb2
from pydantic_core import to_jsonable_python

import stalwart as sw
from stalwart.core.errors import RemoteTaskFailed

from .tasks import value_of

__all__ = ["remote_agent"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")

#: Task states of a task still going (a send answered before it settled).
_GOING = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
#: Seconds between reads of a task still going.
POLL = 0.5


def _parts(value: Any) -> list[Part]:
    if isinstance(value, str):
        return [Part(text=value)]
    data = struct_pb2.Value()
    json_format.ParseDict(to_jsonable_python(value, fallback=str), data)
    return [Part(data=data)]


def _reply(task: Task) -> dict[str, Any]:
    """What a send records: the remote task as plain data."""
    state = task.status.state
    answer: Any = None
    if task.artifacts:
        values = [value_of(a.parts) for a in task.artifacts]
        answer = values[0] if len(values) == 1 else values
    said = value_of(task.status.message.parts) if task.status.HasField("message") else None
    return {
        "task_id": task.id,
        "context_id": task.context_id,
        "state": TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-"),
        "answer": answer,
        "said": said,
    }


def _secrets(url: str) -> list[str]:
    """The parts of ``url`` that may be credentials: its user info and query."""
    parsed = httpx.URL(url)
    found = [parsed.userinfo.decode(), parsed.query.decode()]
    return sorted((s for s in found if s), key=len, reverse=True)


def _checked(task: Task, task_id: str | None, name: str) -> Task:
    """``task``, if it is the task asked about (``task_id``, when one was)."""
    if task_id and task.id != task_id:
        raise RemoteTaskFailed(
            f"remote agent {name!r} answered about task {task.id[:100]!r}, "
            f"not the task {task_id!r} it was asked about"
        )
    return task


def remote_agent(
    url: str,
    *,
    name: str,
    description: str = "",
    headers: Mapping[str, str] | None = None,
    timeout: float = 600.0,
    signal: str | None = None,
) -> sw.Policy[..., Any]:
    """The A2A agent at ``url`` (its base URL, where its agent card is) as a
    tool named ``name``: ``question`` goes to it as a text message, and its
    answer (the task's result artifact: text, or the JSON value of a data
    part) is the tool's result.

    ``headers`` go with every request (credentials: never recorded).
    ``timeout``: seconds one send may take. A remote task that asks for input
    makes the calling run wait for the signal ``signal`` (default
    ``"<name>.input"``), with the remote agent's question as its prompt; the
    signal's payload is sent as the answer. A task that ends failed,
    rejected or cancelled raises :class:`~stalwart.RemoteTaskFailed`.
    """
    if not _NAME.match(name):
        raise ValueError(
            f"remote agent name {name!r}: 1 to 64 letters, digits, '_' or '-', from a letter"
        )
    wait = signal or f"{name}.input"
    fixed_headers = dict(headers or {})
    secrets = _secrets(url)

    def failed(exc: Exception) -> RemoteTaskFailed:
        text = f"{type(exc).__name__}: {exc}"
        for secret in secrets:
            text = text.replace(secret, "***")
        return RemoteTaskFailed(f"remote agent {name!r}: {text}")

    async def send(
        ctx: sw.Context,
        content: Any,
        task_id: str | None = None,
        context_id: str | None = None,
    ) -> dict[str, Any]:
        """Send one message to the remote agent and record what its task says."""
        message = Message(
            message_id=ctx.idempotency_key,  # the same on every execution of this step
            role=Role.ROLE_USER,
            parts=_parts(content),
            task_id=task_id or "",
            context_id=context_id or "",
        )
        try:
            async with httpx.AsyncClient(headers=fixed_headers, timeout=timeout) as http:
                client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
                call = ClientCallContext(timeout=timeout)
                request = SendMessageRequest(message=message)
                task: Task | None = None
                response: StreamResponse
                async for response in client.send_message(request, context=call):
                    if response.HasField("task"):
                        task = _checked(response.task, task_id, name)
                # A server that answers before the task settles: ask until it does.
                deadline = time.monotonic() + timeout
                while task is not None and task.status.state in _GOING:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the task did not settle in {timeout}s")
                    await asyncio.sleep(POLL)
                    asked = task.id
                    task = _checked(
                        await client.get_task(GetTaskRequest(id=asked), context=call), asked, name
                    )
                await client.close()
        except RemoteTaskFailed:
            raise
        except Exception as exc:
            raise failed(exc) from None
        if task is None:
            raise RemoteTaskFailed(f"remote agent {name!r} answered without a task")
        return _reply(task)

    send_step = sw.policy(name=f"{name}_send")(send)

    async def ask(ctx: sw.Context, question: str) -> Any:
        reply = await ctx.call(send_step, content=question)
        while reply["state"] == "input-required":
            said = reply["said"]
            answer = await ctx.wait_for(
                wait,
                prompt=said if isinstance(said, str) else f"{name} asks for input",
                about={"agent": name, "task": reply["task_id"], "asks": said},
            )
            reply = await ctx.call(
                send_step,
                content=answer,
                task_id=reply["task_id"],
                context_id=reply["context_id"],
            )
        if reply["state"] != "completed":
            said = reply["said"]
            raise RemoteTaskFailed(
                f"remote agent {name!r}, task {reply['task_id']!r}: ended {reply['state']}"
                + (f": {said}" if said else "")
            )
        return reply["answer"]

    ask.__name__ = ask.__qualname__ = name
    ask.__doc__ = (description or f"Ask the remote agent {name}.") + (
        "\n\nArgs:\n    question: The question or the task, with everything needed to do it."
    )
    return sw.policy(name=name, description=description or None)(ask)
