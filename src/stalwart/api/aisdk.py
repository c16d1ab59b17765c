"""The AI SDK's UI message stream over durable conversations and runs.

A page written with the AI SDK (``useChat`` and its ``DefaultChatTransport``)
drives a durable conversation with a served agent:

- ``POST /agents/{agent}/aisdk``: the SDK's request body (``id``, the
  chat's id, is the conversation's; ``messages``, each with ``parts``).
  A last message from the user is a new turn (its ``id`` is the turn's
  message id: sent twice, one turn); a last message from the assistant
  carries the person's answers to tool approvals (``addToolApprovalResponse``),
  sent to the conversation as the approval's signal (docs/approvals.md), and
  the turn's stream goes on from there.
- ``GET /agents/{agent}/aisdk/{conversation_id}/stream``: the SDK's
  ``resumeStream`` after a disconnect or a server restart: the turn being
  answered, from its start, rebuilt from the ledger; 204 when none is.
- ``GET /runs/{run_id}/aisdk``: any durable run's stream, in the same chunks.

The response is Server-Sent Events with ``x-vercel-ai-ui-message-stream:
v1``: ``start``, ``start-step``, ``text-start``/``text-delta``/``text-end``,
``tool-input-start``/``tool-input-delta``/``tool-input-available``,
``tool-output-available`` (or ``-error``, ``-denied``),
``tool-approval-request``, ``finish-step``, ``finish``, ``error``, then
``[DONE]``. A turn that waits for an approval ends its stream there, as
the SDK expects; the run waits durably (S7) until the answer comes.
Tools are sent as dynamic tools: the page need not declare them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import Response

from ..core.errors import ApprovalError, StoreError
from .models import FieldProblem
from .routes import Api, CountedStream, problem, read_body, take_stream
from .turns import (
    agent_of,
    approval_id,
    check_ids,
    latest_turn,
    put_turn,
    read_approval_id,
    turn_events,
    turn_id,
)
from .uievents import (
    ApprovalAsked,
    Finished,
    Stage,
    StateChanged,
    Status,
    TextDelta,
    TextEnded,
    TextStarted,
    ToolAnswered,
    ToolCalled,
    ToolDenied,
    UIEvent,
    ui_events,
)

__all__ = [
    "HEADERS",
    "chunks",
    "continue_chat",
    "reply_id",
    "resume_chat",
    "run_chunks",
]

#: What the SDK reads a UI message stream by.
HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
}


_REPLY = ":reply"


def _sse(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk, separators=(',', ':'), ensure_ascii=False)}\n\n"


async def chunks(
    events: AsyncIterator[UIEvent], message_id: str, *, after: frozenset[str] = frozenset()
) -> AsyncIterator[str]:
    """The SSE frames of ``events`` as one assistant message ``message_id``.
    ``after``: approval waits the client has answered: what came up to the
    last of them the client holds already, and is not sent again."""
    skipping = set(after)
    yield _sse({"type": "start", "messageId": message_id})
    step: str | None = None  # the model step whose parts are being sent

    def step_of(mid: str) -> list[dict[str, Any]]:
        nonlocal step
        model = mid.rsplit("#", 1)[0]  # a tool's step belongs to its model's
        if model == step:
            return []
        out = [{"type": "finish-step"}] if step is not None else []
        step = model
        return [*out, {"type": "start-step"}]

    async for ev in events:
        if skipping:
            if isinstance(ev, ApprovalAsked):
                skipping.discard(ev.signal)
            continue
        if isinstance(ev, ApprovalAsked) and ev.answered:
            continue
        out: list[dict[str, Any]] = []
        if isinstance(ev, TextStarted):
            out = [*step_of(ev.message_id), {"type": "text-start", "id": ev.message_id}]
        elif isinstance(ev, TextDelta):
            out = [{"type": "text-delta", "id": ev.message_id, "delta": ev.delta}]
        elif isinstance(ev, TextEnded):
            out = [{"type": "text-end", "id": ev.message_id}]
        elif isinstance(ev, ToolCalled):
            head = {"toolCallId": ev.call_id, "toolName": ev.name, "dynamic": True}
            args = json.dumps(ev.arguments, ensure_ascii=False)
            out = [
                *step_of(ev.message_id),
                {"type": "tool-input-start", **head},
                {"type": "tool-input-delta", "toolCallId": ev.call_id, "inputTextDelta": args},
                {"type": "tool-input-available", **head, "input": ev.arguments},
            ]
        elif isinstance(ev, ToolAnswered):
            if ev.error is None:
                out = [
                    {
                        "type": "tool-output-available",
                        "toolCallId": ev.call_id,
                        "output": ev.output,
                        "dynamic": True,
                    }
                ]
            else:
                out = [
                    {
                        "type": "tool-output-error",
                        "toolCallId": ev.call_id,
                        "errorText": ev.error,
                        "dynamic": True,
                    }
                ]
        elif isinstance(ev, ToolDenied):
            out = [{"type": "tool-output-denied", "toolCallId": ev.call_id}]
        elif isinstance(ev, ApprovalAsked):
            for call_id, _, _ in ev.calls:
                out.append(
                    {
                        "type": "tool-approval-request",
                        "approvalId": approval_id(ev.signal, call_id),
                        "toolCallId": call_id,
                    }
                )
            out += [*([{"type": "finish-step"}] if step else []), {"type": "finish"}]
            for chunk in out:
                yield _sse(chunk)
            yield "data: [DONE]\n\n"
            return
        elif isinstance(ev, Status | Stage | StateChanged):
            continue  # the AI SDK's stream has no place for the run's state
        elif isinstance(ev, Finished):
            if ev.error is not None or ev.status != "succeeded":
                out = [{"type": "error", "errorText": ev.error or f"the run {ev.status}"}]
            out += [*([{"type": "finish-step"}] if step else [])]
            out.append({"type": "finish", "finishReason": "stop" if not ev.error else "error"})
            for chunk in out:
                yield _sse(chunk)
            yield "data: [DONE]\n\n"
            return
        for chunk in out:
            yield _sse(chunk)


def _stream(api: Api, frames: AsyncIterator[str]) -> CountedStream:
    return CountedStream(frames, release=api, media_type="text/event-stream", headers=HEADERS)


def _text(message: dict[str, Any]) -> str:
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    return "".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    )


def _answers(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The approval answers an assistant message carries, by signal: call id -> decision."""
    out: dict[str, dict[str, Any]] = {}
    for part in message.get("parts") or ():
        if not isinstance(part, dict) or part.get("state") != "approval-responded":
            continue
        approval = part.get("approval")
        named = read_approval_id(approval.get("id")) if isinstance(approval, dict) else None
        if named is None or not isinstance(approval, dict):
            continue
        signal, call_id = named
        if approval.get("approved") is True:
            decision: dict[str, Any] = {"decision": "approve"}
        else:
            decision = {"decision": "deny"}
            if isinstance(approval.get("reason"), str) and approval["reason"]:
                decision["reason"] = approval["reason"]
        out.setdefault(signal, {})[call_id] = decision
    return out


def _message_problem(message: Any) -> str | None:
    """Why ``message`` is not one the SDK sends (the document's schema), or None."""
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return "an object whose role is user or assistant"
    if not isinstance(message.get("id"), str) or not isinstance(message.get("parts"), list):
        return "an id (a string) and parts (a list)"
    if not all(isinstance(p, dict) for p in message["parts"]):
        return "parts are objects"
    if message["role"] == "user":
        if check_ids(message["id"], message["id"], ("id", "id")):
            return "a user message's id names its turn: a run id a user may choose"
        if not _text(message):
            return "a user message has a text part"
    return None


def _refused(message: str, field: str) -> Response:
    fields = [FieldProblem(field=field, message=message)]
    return problem(422, f"invalid chat request: {message}", fields)


async def continue_chat(request: Request) -> Response:
    """``POST /agents/{agent}/aisdk``: a new turn, or approvals answered; its stream."""
    api: Api = request.app.state.api
    found = agent_of(api, unquote(request.path_params["agent"]))
    if isinstance(found, Response):
        return found
    try:
        _, body = await read_body(request, api.max_body)
    except OverflowError as exc:
        return problem(413, str(exc))
    except ValueError as exc:
        return _refused(str(exc), "(body)")
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(messages, list) or not messages:
        return _refused("an object with id and messages (a non-empty list)", "(body)")
    if "trigger" in body and not isinstance(body["trigger"], str):
        return _refused("a string, as the SDK sends (submit-message)", "trigger")
    for i, m in enumerate(messages):
        why = _message_problem(m)
        if why is not None:
            return _refused(why, f"messages[{i}]")
    at = len(messages) - 1
    last = messages[at]
    if last["role"] == "user":
        problems = check_ids(body.get("id"), last.get("id"), ("id", f"messages[{at}].id"))
        if problems:
            summary = "; ".join(f"{p.field}: {p.message}" for p in problems)
            return problem(422, f"invalid chat request: {summary}", problems)
        started = await put_turn(api, found, body["id"], last["id"], _text(last), "id")
        if isinstance(started, Response):
            return started
        frames = chunks(turn_events(api, body["id"], started), reply_id(started))
        return await take_stream(api, _ready(api, frames))
    # The assistant's message carries answers: to the turn it is the reply of.
    turn = _turn_of(body.get("id"), last.get("id"))
    if turn is None:
        message = "the assistant's message is not the reply to a turn of this conversation"
        return problem(404, message, [FieldProblem(field=f"messages[{at}].id", message=message)])
    conversation_id: str = body["id"]
    await api.runner.get_run(turn)  # RunNotFound: 404
    answers = _answers(last)
    for signal, decisions in answers.items():
        try:
            await api.runner.signal(conversation_id, signal, decisions)
        except ApprovalError as exc:
            fields = [FieldProblem(field=f"messages[{at}].parts", message=str(exc))]
            return problem(422, str(exc), fields, code=exc.error_code)
        except StoreError:
            return problem(409, f"conversation {conversation_id!r} takes no signals now")
    frames = chunks(
        turn_events(api, conversation_id, turn), reply_id(turn), after=frozenset(answers)
    )
    return await take_stream(api, _ready(api, frames))


def reply_id(turn: str) -> str:
    """The id of the assistant's message that answers the turn ``turn``."""
    return f"{turn}{_REPLY}"


def _turn_of(conversation_id: Any, message_id: Any) -> str | None:
    """The turn whose reply ``message_id`` is, in the conversation; None if it is not one."""
    if not isinstance(conversation_id, str) or not isinstance(message_id, str):
        return None
    turn = message_id.removesuffix(_REPLY)
    prefix = turn_id(conversation_id, "")
    if turn == message_id or not turn.startswith(prefix):
        return None
    if check_ids(conversation_id, turn[len(prefix) :], ("id", "id")):
        return None
    return turn


def _ready(api: Api, frames: AsyncIterator[str]) -> Any:
    async def opening() -> Response:
        return _stream(api, frames)

    return opening


async def resume_chat(request: Request) -> Response:
    """``GET /agents/{agent}/aisdk/{conversation_id}/stream``: the turn being
    answered, from its start; 204 when none is."""
    api: Api = request.app.state.api
    found = agent_of(api, unquote(request.path_params["agent"]))
    if isinstance(found, Response):
        return found
    conversation_id = unquote(request.path_params["conversation_id"])
    problems = check_ids(conversation_id, "m", ("conversation_id", "conversation_id"))
    if problems:
        return problem(422, f"invalid conversation id: {problems[0].message}", problems)
    turn = await latest_turn(api, conversation_id)
    if turn is None:
        return Response(status_code=204)
    frames = chunks(turn_events(api, conversation_id, turn), reply_id(turn))
    return await take_stream(api, _ready(api, frames))


async def run_chunks(request: Request) -> Response:
    """``GET /runs/{run_id}/aisdk``: a durable run's stream as UI message chunks."""
    api: Api = request.app.state.api
    run_id = unquote(request.path_params["run_id"])

    async def opening() -> Response:
        first = await api.runner.get_run(run_id)
        events = ui_events(
            api.runner, first, poll=api.poll, live=api.execute, find_policy=api.policies.get
        )
        return _stream(api, chunks(events, reply_id(run_id)))

    return await take_stream(api, opening)
