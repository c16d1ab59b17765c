"""Two clients answering one ``input-required`` task at once: the first
answer is the wait's, the second is refused with an A2A error and never
delivered (not to this question, not to the task's next one). Real
``stalwart a2a serve`` processes on SQLite and PostgreSQL, two SDK clients."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import GetTaskRequest, TaskState
from a2a.utils.errors import A2AError
from tests.a2a.serving import A2AServer, ask, text_message

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


async def test_of_two_answers_racing_for_one_question_one_is_refused(store_url: str) -> None:
    """``panel`` thinks half a second before its next question, so both
    answers arrive while the first is asked: the second finds the wait
    answered (the run woken), or, had both read it open, the store refuses
    it (the wait it saw is no longer open: tests/stores/test_signals_waiting.py)."""
    server = A2AServer("panel", store_url)
    await server.start()
    try:
        first, second = await server.client(), await server.client()
        for round_ in range(3):
            task = await ask(first, text_message(f"jobs {round_}"))
            assert task.status.message.parts[0].text == "Your name?"
            seen = await second.get_task(GetTaskRequest(id=task.id))  # both see the question
            assert seen.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            got = await asyncio.gather(
                ask(first, text_message("Ada", task_id=task.id)),
                ask(second, text_message("Bob", task_id=task.id)),
                return_exceptions=True,
            )
            refused = [g for g in got if isinstance(g, BaseException)]
            assert len(refused) == 1, got
            assert isinstance(refused[0], A2AError), refused  # the SDK's error, from JSON-RPC
            assert f"task {task.id!r}" in str(refused[0])
            assert "another message answered it first" in str(refused[0])
            winner = "Bob" if got[0] is refused[0] else "Ada"
            now = await first.get_task(GetTaskRequest(id=task.id))
            assert now.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert now.status.message.parts[0].text == "Your city?"  # the loser's is not the city
            done = await ask(second, text_message("Paris", task_id=task.id))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert done.artifacts[0].parts[0].text == f"jobs {round_}: {winner} from Paris"
        await first.close()
        await second.close()
    finally:
        server.kill()
