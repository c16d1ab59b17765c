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

from ..core.approval import APPROVAL_PREFIX
from ..core.errors import ApprovalError, StoreError
from .models import FieldProblem
from .routes import Api, CountedStream, problem, read_body, take_stream
from .turns import agent_of, check_ids, latest_turn, put_turn, turn_events, turn_id
from .uievents import (
    ApprovalAsked,
    Finished,
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

__all__ = ["HEADERS", "approval_id", "chunks", "continue_chat", "resume_chat", "run_chunks"]

#: What the SDK reads a UI message stream by.
HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
}


def approval_id(signal: str, call_id: str) -> str:
    """The SDK's approval id of one call in the approval wait ``signal``."""
    return f"{signal}/{call_id}"


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
        elif isinstance(ev, Status):
            continue
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
        str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


def _answers(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The approval answers an assistant message carries, by signal: call id -> decision."""
    out: dict[str, dict[str, Any]] = {}
    for part in message.get("parts") or ():
        if not isinstance(part, dict) or part.get("state") != "approval-responded":
            continue
        approval = part.get("approval")
        if not isinstance(approval, dict) or not isinstance(approval.get("id"), str):
            continue
        signal, _, call_id = approval["id"].partition("/")
        if not signal.startswith(APPROVAL_PREFIX) or not call_id:
            continue
        if approval.get("approved") is True:
            decision: dict[str, Any] = {"decision": "approve"}
        else:
            decision = {"decision": "deny"}
            if isinstance(approval.get("reason"), str) and approval["reason"]:
                decision["reason"] = approval["reason"]
        out.setdefault(signal, {})[call_id] = decision
    return out


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
        return problem(422, str(exc), [FieldProblem(field="(body)", message=str(exc))])
    problems: list[FieldProblem] = []
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(messages, list) or not messages:
        message = "an object with id and messages (a non-empty list), as the AI SDK sends"
        return problem(
            422, f"invalid chat request: {message}", [FieldProblem(field="(body)", message=message)]
        )
    last = messages[-1]
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not isinstance(last, dict) or last.get("role") not in ("user", "assistant") or not users:
        message = "the last message is the user's or the assistant's, after one of the user's"
        return problem(
            422,
            f"invalid chat request: {message}",
            [FieldProblem(field="messages", message=message)],
        )
    asked = users[-1]
    at = len(messages) - 1
    problems += check_ids(
        body.get("id"), asked.get("id"), ("id", f"messages[{messages.index(asked)}].id")
    )
    if last["role"] == "user" and not _text(last):
        problems.append(FieldProblem(field=f"messages[{at}].parts", message="no text part"))
    if problems:
        summary = "; ".join(f"{p.field}: {p.message}" for p in problems)
        return problem(422, f"invalid chat request: {summary}", problems)
    conversation_id: str = body["id"]
    if last["role"] == "user":
        turn = await put_turn(api, found, conversation_id, last["id"], _text(last), "id")
        if isinstance(turn, Response):
            return turn
        assistant = f"{turn}:reply"
        after: frozenset[str] = frozenset()
    else:
        turn = turn_id(conversation_id, asked["id"])
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
        assistant = str(last.get("id") or f"{turn}:reply")
        after = frozenset(answers)
    frames = chunks(turn_events(api, conversation_id, turn), assistant, after=after)
    return await take_stream(api, _ready(api, frames))


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
    turn = await latest_turn(api, conversation_id)
    if turn is None:
        return Response(status_code=204)
    frames = chunks(turn_events(api, conversation_id, turn), f"{turn}:reply")
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
        return _stream(api, chunks(events, f"{run_id}:reply"))

    return await take_stream(api, opening)
