"""An agent served with ``--conversation``: each contextId a durable
conversation, each task one of its turns, with the SDK's client, on SQLite
and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from tests.a2a.serving import A2AServer, ask, collect, text_message

pytestmark = pytest.mark.slow

COMPLETED = TaskState.TASK_STATE_COMPLETED


def in_context(text: str, context_id: str, message_id: str) -> Message:
    return Message(
        message_id=message_id, context_id=context_id, role=Role.ROLE_USER, parts=[Part(text=text)]
    )


async def test_messages_of_one_context_are_turns_of_one_conversation_across_a_restart(
    store_url: str,
) -> None:
    server = A2AServer("chatbot", store_url, conversation=True)
    await server.start()
    try:
        client = await server.client()
        first = await ask(client, in_context("apples", "talk-1", "m-1"))
        other = await ask(client, in_context("pears", "talk-2", "m-2"))
        await client.close()
        server.kill()
        await server.start()
        streaming = await server.client(streaming=True)
        events = await collect(streaming, in_context("bananas", "talk-1", "m-3"))
        await streaming.close()
        client = await server.client()
        read = await client.get_task(GetTaskRequest(id=first.id))
        again = await ask(client, in_context("apples", "talk-1", "m-1"))  # a retry
        listed = await client.list_tasks(ListTasksRequest(context_id="talk-1"))
        await client.close()
    finally:
        server.kill()
    assert first.status.state == COMPLETED
    assert first.artifacts[0].parts[0].text == "you said apples"
    assert other.artifacts[0].parts[0].text == "you said pears"
    assert read.context_id == "talk-1"
    assert read.artifacts[0].parts[0].text == "you said apples"
    second = events[-2].artifact_update
    assert second.artifact.parts[0].text == "you said apples then bananas"
    assert events[-1].status_update.status.state == COMPLETED
    assert events[-1].status_update.context_id == "talk-1"
    assert again.id == first.id
    assert again.artifacts[0].parts[0].text == "you said apples"
    assert sorted(t.id for t in listed.tasks) == sorted({first.id, second.task_id})


async def test_a_question_of_the_conversation_is_its_turns_input_required(
    store_url: str, tmp_path: Path
) -> None:
    server = A2AServer("concierge", store_url, conversation=True)
    await server.start()
    try:
        client = await server.client()
        task = await ask(client, text_message("Book a table"))
        server.kill()
        await server.start()
        read = await client.get_task(GetTaskRequest(id=task.id))
        done = await ask(client, text_message("yes", task_id=task.id))
        await client.close()
    finally:
        server.kill()
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text == "Confirm the booking?"
    assert read.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert done.status.state == COMPLETED
    assert done.artifacts[0].parts[0].text == "Booked: yes"


async def test_a_turn_of_one_agent_is_no_task_of_another_agent_on_the_same_store(
    store_url: str,
) -> None:
    chatbot = A2AServer("chatbot", store_url, conversation=True)
    concierge = A2AServer("concierge", store_url, conversation=True)
    await chatbot.start()
    await concierge.start()
    try:
        client = await chatbot.client()
        task = await ask(client, in_context("my secret", "private", "m-1"))
        await client.close()
        client = await concierge.client()
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id=task.id))
        listed = await client.list_tasks(ListTasksRequest())
        await client.close()
    finally:
        chatbot.kill()
        concierge.kill()
    assert task.artifacts[0].parts[0].text == "you said my secret"
    assert listed.tasks == []
