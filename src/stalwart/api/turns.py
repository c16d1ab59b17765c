"""A conversation's turn as the UI protocols start, continue and stream it.

Shared by :mod:`.agui` and :mod:`.aisdk`: the agent is one the server
serves, named in the path, never imported (S13); the conversation id and
the message id are user run ids (the same message id again is the same
turn, so a client that retries gets the same reply, never a second one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response

from ..conversations import Conversation
from ..core.approval import wait_key
from ..core.errors import InputMismatchError, SerializationError
from ..core.ledger import CHILD_MARK, TERMINAL, check_run_id
from ..core.policy import Policy
from .models import FieldProblem
from .routes import Api, problem
from .uievents import UIEvent, ui_events

__all__ = [
    "agent_of",
    "approval_id",
    "check_ids",
    "latest_turn",
    "put_turn",
    "read_approval_id",
    "turn_events",
    "turn_id",
]

#: Longest signal name an approval id may carry (the API's signal names' limit).
_MAX_SIGNAL = 200


def approval_id(signal: str, call_id: str) -> str:
    """The protocols' id of one call in the approval wait ``signal`` (an
    AI SDK approval id, an AG-UI interrupt id)."""
    return f"{signal}/{call_id}"


def read_approval_id(text: object) -> tuple[str, str] | None:
    """The approval wait's signal and the call's id an approval id names;
    None unless it is one this server could have sent."""
    if not isinstance(text, str):
        return None
    signal, _, call_id = text.partition("/")
    if wait_key(signal) is None or not call_id or len(signal) > _MAX_SIGNAL:
        return None
    if not signal.isprintable():
        return None
    return signal, call_id


def agent_of(api: Api, name: str) -> Policy[Any, Any] | Response:
    """The served policy ``name`` that can hold a conversation, or a 404 naming it."""
    agent = api.policies.get(name)
    if agent is None or "question" not in {p.name for p in agent.signature.params}:
        message = f"no served agent named {name[:200]!r} (a policy taking a question)"
        return problem(404, message, [FieldProblem(field="agent", message=message)])
    return agent


def turn_id(conversation_id: str, message_id: str) -> str:
    """The run id of the turn that answers ``message_id``."""
    return f"{conversation_id}{CHILD_MARK}turn-{message_id}"


def check_ids(conversation_id: Any, message_id: Any, where: tuple[str, str]) -> list[FieldProblem]:
    """Why the ids cannot name a conversation and its turn, as problems
    named by ``where`` (the fields of the protocol's body)."""
    problems = []
    for value, field in ((conversation_id, where[0]), (message_id, where[1])):
        try:
            check_run_id(value)
        except (ValueError, TypeError) as exc:
            problems.append(FieldProblem(field=field, message=str(exc)))
    return problems


async def put_turn(
    api: Api, agent: Policy[Any, Any], conversation_id: str, message_id: str, text: str, field: str
) -> str | Response:
    """Queue ``text`` as the turn ``message_id`` of the conversation (started
    if new); the turn's run id, or the response saying why not."""
    try:
        queue = None if api.execute else "default"
        conversation = Conversation(api.runner, agent, conversation_id, queue=queue)
        handle = await conversation.put(text, message_id=message_id)
    except InputMismatchError as exc:
        fields = [FieldProblem(field=field, message=str(exc))]
        return problem(409, str(exc), fields, code=exc.error_code)
    except SerializationError as exc:
        fields = [FieldProblem(field=field, message=str(exc))]
        return problem(422, str(exc), fields, code=exc.error_code)
    return handle.run_id


async def turn_events(api: Api, conversation_id: str, turn: str) -> AsyncIterator[UIEvent]:
    """The turn's UI events from its start (:func:`.uievents.ui_events`);
    RunNotFound when the conversation or the turn does not exist."""
    await api.runner.get_run(turn)  # RunNotFound: answered 404
    first = await api.runner.get_run(conversation_id)
    async for ev in ui_events(
        api.runner, first, turn=turn, poll=api.poll, live=api.execute, find_policy=api.policies.get
    ):
        yield ev


async def latest_turn(api: Api, conversation_id: str) -> str | None:
    """The conversation's newest turn still being answered, if any."""
    prefix = f"{conversation_id}{CHILD_MARK}turn-"
    for rec in await api.runner.list_runs(None, 20, id_contains=prefix):
        if rec.id.startswith(prefix) and rec.status not in TERMINAL:
            return rec.id
    return None
