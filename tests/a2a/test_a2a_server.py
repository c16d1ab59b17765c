"""A policy and an llm.Agent served by ``stalwart a2a serve``, reached with the
official A2A SDK's client, on SQLite and PostgreSQL: every task a durable run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import A2AError
from tests.a2a.serving import A2AServer, ask, collect, data_message, text_message

import stalwart as sw

pytestmark = pytest.mark.slow

COMPLETED = TaskState.TASK_STATE_COMPLETED


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def test_the_agent_card_names_the_agent_and_its_tools_as_skills(tmp_path: Path) -> None:
    server = A2AServer("forecaster", f"sqlite:///{tmp_path / 'a2a.db'}")
    await server.start()
    try:
        async with httpx.AsyncClient() as http:
            card = (await http.get(server.url + ".well-known/agent-card.json")).json()
    finally:
        server.kill()
    assert card["name"] == "forecaster"
    assert card["description"].startswith("You tell the weather")
    assert [s["id"] for s in card["skills"]] == ["weather"]
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"][0]["url"] == server.url


async def test_a_message_is_a_durable_run_and_the_same_message_the_same_task(
    store_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    server = A2AServer("shout", store_url, {"A2A_LOG": str(log)})
    await server.start()
    try:
        client = await server.client()
        message = text_message("hello")
        task = await ask(client, message)
        again = await ask(client, message)  # a retry: the same messageId
        await client.close()
    finally:
        server.kill()
    assert task.status.state == COMPLETED
    assert task.artifacts[0].parts[0].text == "HELLO!"
    assert again.id == task.id
    assert again.artifacts[0].parts[0].text == "HELLO!"
    assert lines(log) == ["shout hello"]  # executed once


async def test_an_agent_with_the_scripted_model_answers_through_its_tool(
    store_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    server = A2AServer("forecaster", store_url, {"A2A_LOG": str(log)})
    await server.start()
    try:
        client = await server.client()
        task = await ask(client, text_message("Weather in Paris?"))
        await client.close()
    finally:
        server.kill()
    assert task.status.state == COMPLETED
    assert task.artifacts[0].parts[0].text == "It is sunny in Paris."
    assert lines(log) == ["weather Paris"]


async def test_a_stream_sends_the_runs_emits_its_result_and_its_final_status(
    store_url: str,
) -> None:
    server = A2AServer("shout", store_url)
    await server.start()
    try:
        client = await server.client(streaming=True)
        events = await collect(client, text_message("hey"))
        await client.close()
    finally:
        server.kill()
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds == ["task", "status_update", "artifact_update", "status_update"]
    assert events[1].status_update.status.message.parts[0].text == "shouting"
    assert events[2].artifact_update.artifact.parts[0].text == "HEY!"
    assert events[3].status_update.status.state == COMPLETED
    assert (
        len({e.task.id or e.status_update.task_id or e.artifact_update.task_id for e in events})
        == 1
    )


async def test_input_required_is_a_durable_wait_answered_by_the_next_message_after_a_restart(
    store_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    server = A2AServer("greeter", store_url, {"A2A_LOG": str(log)})
    await server.start()
    try:
        client = await server.client()
        task = await ask(client, text_message("tea"))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert task.status.message.parts[0].text == "Who is asking about 'tea'?"
        await client.close()
        server.kill()  # nothing held while it waits: the store has it all
        await server.start()
        client = await server.client(streaming=True)
        read = await client.get_task(GetTaskRequest(id=task.id))
        assert read.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert read.status.message.parts[0].text == "Who is asking about 'tea'?"
        assert read.context_id == task.context_id
        answer = text_message("Ada", task_id=task.id)
        events = await collect(client, answer)
        done = await client.get_task(GetTaskRequest(id=task.id))
        await client.close()
    finally:
        server.kill()
    assert events[-1].status_update.status.state == COMPLETED
    assert done.status.state == COMPLETED
    assert done.artifacts[0].parts[0].text == "Hello, Ada: TEA"
    assert lines(log) == ["shout tea"]


async def test_an_answer_sent_again_is_delivered_once_never_to_the_next_question(
    store_url: str,
) -> None:
    server = A2AServer("interviewer", store_url)
    await server.start()
    try:
        client = await server.client()
        task = await ask(client, text_message("jobs"))
        answer = text_message("Ada", task_id=task.id)
        first = await ask(client, answer)
        assert first.status.message.parts[0].text == "Your city?"
        again = await ask(client, answer)  # a client retrying after a lost reply
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert again.status.message.parts[0].text == "Your city?"
        done = await ask(client, text_message("Paris", task_id=task.id))
        await client.close()
    finally:
        server.kill()
    assert done.status.state == COMPLETED
    assert done.artifacts[0].parts[0].text == "jobs: Ada from Paris"


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_a_tool_approval_is_asked_as_input_and_the_answer_decides(
    decision: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    server = A2AServer("cashier", f"sqlite:///{tmp_path / 'a2a.db'}", {"A2A_LOG": str(log)})
    await server.start()
    try:
        client = await server.client()
        task = await ask(client, text_message("Refund my 30 please"))
        done = await ask(client, text_message(decision, task_id=task.id))
        await client.close()
    finally:
        server.kill()
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "Approve refund" in task.status.message.parts[0].text
    assert done.status.state == COMPLETED
    answer = done.artifacts[0].parts[0].text
    if decision == "approve":
        assert answer == "Done: refunded 30"
        assert lines(log) == ["refund 30"]
    else:
        assert "denied" in answer
        assert lines(log) == []


async def test_a_cancelled_task_is_the_runs_cancel_and_stays_cancelled(store_url: str) -> None:
    server = A2AServer("greeter", store_url)
    await server.start()
    try:
        client = await server.client()
        task = await ask(client, text_message("coffee"))
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        read = await client.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(A2AError, match="not waiting for input"):
            await ask(client, text_message("Bob", task_id=task.id))
        await client.close()
    finally:
        server.kill()
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert read.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_task_id_from_a_client_reaches_only_this_agents_tasks(store_url: str) -> None:
    server = A2AServer("shout", store_url)
    await server.start()
    try:
        client = await server.client()
        task = await ask(client, text_message("mine"))
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        for foreign in ("some-other-run", "a2a-0000", "../../etc"):
            with pytest.raises(A2AError, match=r"not found|no task"):
                await client.get_task(GetTaskRequest(id=foreign))
            with pytest.raises(A2AError, match=r"not found|no task"):
                await ask(client, text_message("x", task_id=foreign))
        await client.close()
    finally:
        server.kill()
    assert [t.id for t in listed.tasks] == [task.id]


async def test_a_data_part_gives_the_arguments_by_name_and_bad_ones_are_refused_naming_them(
    tmp_path: Path,
) -> None:
    server = A2AServer("shout", f"sqlite:///{tmp_path / 'a2a.db'}")
    await server.start()
    try:
        client = await server.client()
        task = await ask(client, data_message({"question": "by name"}))
        with pytest.raises(A2AError, match=r"message\.parts.*question"):
            await ask(client, data_message({"query": "wrong name"}))
        with pytest.raises(A2AError, match=r"message\.parts"):
            await ask(client, text_message(""))
        await client.close()
    finally:
        server.kill()
    assert task.artifacts[0].parts[0].text == "BY NAME!"


async def test_a_task_killed_mid_step_resumes_after_a_restart_and_finishes_once(
    store_url: str, tmp_path: Path
) -> None:
    log, mark = tmp_path / "log", tmp_path / "mark"
    env = {"A2A_LOG": str(log), "A2A_MARK": str(mark), "A2A_SLOW": "60"}
    server = A2AServer("counter", store_url, env)
    await server.start()
    try:
        client = await server.client()
        message = text_message("sheep")
        sent = asyncio.ensure_future(collect(client, message, return_immediately=True))
        (first,) = await sent
        task_id = first.task.id
        for _ in range(600):
            if mark.exists():
                break
            await asyncio.sleep(0.05)
        assert mark.read_text() == "1"
        server.kill()  # SIGKILL in the middle of the first slow step
        await client.close()
        await server.start(A2A_SLOW="0.05")
        client = await server.client()
        for _ in range(600):
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state == COMPLETED:
                break
            await asyncio.sleep(0.1)
        again = await ask(client, message)  # the client retries its message
        await client.close()
    finally:
        server.kill()
    async with sw.Runner(store_url) as runner:
        steps = await runner.steps(task_id)
    assert task.status.state == COMPLETED
    assert task.artifacts[0].parts[0].text == "sheep: 6"
    assert again.id == task_id
    assert sorted(s.name for s in steps) == ["slow_step"] * 3  # each recorded once
    assert lines(log) == [
        "slow 1 started",  # killed here
        "slow 1 started",
        "slow 1 done",
        "slow 2 started",
        "slow 2 done",
        "slow 3 started",
        "slow 3 done",
    ]


async def test_a_client_subscribes_to_a_running_task_until_it_ends(store_url: str) -> None:
    server = A2AServer("counter", store_url, {"A2A_SLOW": "0.3"})
    await server.start()
    try:
        sender = await server.client()
        (first,) = await collect(sender, text_message("goats"), return_immediately=True)
        await sender.close()
        client = await server.client(streaming=True)
        events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=first.task.id))]
        await client.close()
    finally:
        server.kill()
    assert events[0].task.id == first.task.id
    assert events[-2].artifact_update.artifact.parts[0].text == "goats: 6"
    assert events[-1].status_update.status.state == COMPLETED


async def test_cancelling_a_running_task_stops_its_run_before_its_next_step(
    store_url: str, tmp_path: Path
) -> None:
    log, mark = tmp_path / "log", tmp_path / "mark"
    env = {"A2A_LOG": str(log), "A2A_MARK": str(mark), "A2A_SLOW": "60"}
    server = A2AServer("counter", store_url, env)
    await server.start()
    try:
        client = await server.client()
        (first,) = await collect(client, text_message("cows"), return_immediately=True)
        for _ in range(600):
            if mark.exists():
                break
            await asyncio.sleep(0.05)
        cancelled = await client.cancel_task(CancelTaskRequest(id=first.task.id))
        read = await client.get_task(GetTaskRequest(id=first.task.id))
        await client.close()
    finally:
        server.kill()
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert read.status.state == TaskState.TASK_STATE_CANCELED
    assert lines(log) == ["slow 1 started"]


async def test_streamed_text_is_appended_to_the_result_artifact_then_replaced_whole(
    tmp_path: Path,
) -> None:
    server = A2AServer("writer", f"sqlite:///{tmp_path / 'a2a.db'}")
    await server.start()
    try:
        client = await server.client(streaming=True)
        events = await collect(client, text_message("time"))
        await client.close()
    finally:
        server.kill()
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [(c.artifact.parts[0].text, c.append) for c in chunks] == [
        ("Once ", False),
        ("upon ", True),
        ("a time.", True),
        ("Once upon a time.", False),
    ]
    assert chunks[-1].last_chunk
    assert {c.artifact.artifact_id for c in chunks} == {"result"}
