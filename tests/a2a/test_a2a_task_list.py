"""``tasks/list`` through the SDK's client: pages that follow one another
by ``pageToken`` (each task once, newest first), ``status`` and
``statusTimestampAfter`` filters, ``totalSize`` counting every match, and
a token this server never gave refused naming the field."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from a2a.client import Client
from a2a.types import ListTasksRequest, ListTasksResponse, TaskState
from a2a.utils.errors import A2AError
from google.protobuf import timestamp_pb2
from tests.a2a.serving import A2AServer, ask, text_message

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

COMPLETED = TaskState.TASK_STATE_COMPLETED
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED


async def _every_page(client: Client, request: ListTasksRequest) -> list[ListTasksResponse]:
    pages = [await client.list_tasks(request)]
    while pages[-1].next_page_token:
        request.page_token = pages[-1].next_page_token
        pages.append(await client.list_tasks(request))
    return pages


async def test_tasks_are_listed_a_page_at_a_time_and_filtered(tmp_path: Path) -> None:
    server = A2AServer("greeter", f"sqlite:///{tmp_path / 'a2a.db'}")
    await server.start()
    try:
        client = await server.client()
        made = [await ask(client, text_message(f"topic {n}")) for n in range(5)]
        mark = timestamp_pb2.Timestamp()
        mark.FromNanoseconds(time.time_ns())
        for task in made[1:3]:
            done = await ask(client, text_message("Ada", task_id=task.id))
            assert done.status.state == COMPLETED

        pages = await _every_page(client, ListTasksRequest(page_size=2))
        waiting = await client.list_tasks(ListTasksRequest(status=INPUT_REQUIRED))
        finished = await client.list_tasks(ListTasksRequest(status=COMPLETED))
        recent = await client.list_tasks(ListTasksRequest(status_timestamp_after=mark))
        full = await client.list_tasks(ListTasksRequest(status=COMPLETED, include_artifacts=True))
        with pytest.raises(A2AError, match="pageToken"):
            await client.list_tasks(ListTasksRequest(page_token="not-a-token"))
        await client.close()
    finally:
        server.kill()

    newest_first = [t.id for t in reversed(made)]
    assert [len(p.tasks) for p in pages] == [2, 2, 1]
    assert [t.id for p in pages for t in p.tasks] == newest_first
    assert {p.total_size for p in pages} == {5}
    answered = {made[1].id, made[2].id}
    assert {t.id for t in waiting.tasks} == {t.id for t in made} - answered
    assert {t.status.state for t in waiting.tasks} == {INPUT_REQUIRED}
    assert waiting.total_size == 3
    assert {t.id for t in finished.tasks} == answered and finished.total_size == 2
    assert [len(t.artifacts) for t in finished.tasks] == [0, 0]  # unless asked for
    assert {t.artifacts[0].parts[0].text for t in full.tasks} == {
        "Hello, Ada: TOPIC 1",
        "Hello, Ada: TOPIC 2",
    }
    assert {t.id for t in recent.tasks} == answered  # only those that changed since
