"""AG-UI over durable conversations and runs, with the ``ag-ui-protocol``
package's types and encoder.

- ``POST /agents/{agent}/agui``: AG-UI's ``RunAgentInput``. ``threadId`` is
  the conversation's id; the last user message is the turn (its ``id`` is
  the turn's message id: posted again, after a disconnect or a server
  restart, the same input gets the same turn's stream from its start,
  rebuilt from the ledger). ``resume`` answers the tool approvals a
  previous run was interrupted for (docs/approvals.md): an entry
  ``resolved`` with ``{"approved": true}`` approves the call, any other
  denies it (``reason`` is what the model reads); the stream then goes on
  from there.
- ``GET /runs/{run_id}/agui``: any durable run's stream, as AG-UI events.
- :func:`~.mounts.agui_app`: a Starlette app serving one agent at its
  root, to mount where a front end expects an AG-UI endpoint.

Events: ``RUN_STARTED``; ``TEXT_MESSAGE_START``/``CONTENT``/``END`` from
the model's live token stream (whole from the ledger when served again);
``TOOL_CALL_START``/``ARGS``/``END`` and ``TOOL_CALL_RESULT``;
``STEP_STARTED``/``STEP_FINISHED`` as a flow walks from node to node or a
journey moves from step to step (:class:`~.uievents.Stage`); the state,
first whole (``STATE_SNAPSHOT``), then each change of it as a JSON Patch
(``STATE_DELTA``, RFC 6902); ``RUN_FINISHED`` (its ``outcome`` an
``interrupt`` naming the calls waiting for approval, the run waiting
durably meanwhile) or ``RUN_ERROR``.

The state is one JSON object: ``status`` and ``waiting_for`` (where the
run stands), ``asked`` (what its wait asks), ``emitted`` (the value it
emitted last, live only), ``shared`` (a flow's store, as after its last
finished node) and ``journey`` (a journey's ``name``, ``step``, ``state``
and ``done``). Every piece of it is rebuilt from the ledger, so a stream
served again (a disconnect, a restart) sends the same snapshot and deltas,
and a client that applies them holds what the ledger says.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

from ag_ui.core import (
    BaseEvent,
    EventType,
    Interrupt,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from jsonpatch import DiffBuilder
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from ..core.errors import ApprovalError, StoreError
from .models import FieldProblem
from .routes import Api, CountedStream, problem, read_body, take_stream
from .turns import agent_of, approval_id, check_ids, put_turn, read_approval_id, turn_events
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

__all__ = ["events", "run_agent", "run_events"]

_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


async def events(
    source: AsyncIterator[UIEvent],
    thread_id: str,
    run_id: str,
    *,
    after: frozenset[str] = frozenset(),
) -> AsyncIterator[BaseEvent]:
    """``source`` as one AG-UI run. ``after``: approval waits the client has
    answered (``resume``): what came up to the last of them it has, and is
    not sent again."""
    skipping = set(after)
    state = _State()
    active: str | None = None  # the AG-UI step open now
    yield RunStartedEvent(thread_id=thread_id, run_id=run_id)
    async for ev in source:
        if isinstance(ev, Stage):  # a stage is shown even where the rest is skipped
            if ev.started:
                active = ev.name
                yield StepStartedEvent(step_name=ev.name)
            elif active is not None:
                active = None
                yield StepFinishedEvent(step_name=ev.name)
            continue
        if isinstance(ev, StateChanged):
            state.doc[ev.field] = ev.value
            changed = state.event()
            if changed is not None:
                yield changed
            continue
        ends = isinstance(ev, Finished) or (isinstance(ev, ApprovalAsked) and not ev.answered)
        if active is not None and ends and not skipping:
            yield StepFinishedEvent(step_name=active)  # nothing stays open at the end
            active = None
        if skipping:
            if isinstance(ev, ApprovalAsked):
                skipping.discard(ev.signal)
            continue
        if isinstance(ev, ApprovalAsked) and ev.answered:
            continue
        if isinstance(ev, TextStarted):
            yield TextMessageStartEvent(message_id=ev.message_id, role="assistant")
        elif isinstance(ev, TextDelta):
            if ev.delta:
                yield TextMessageContentEvent(message_id=ev.message_id, delta=ev.delta)
        elif isinstance(ev, TextEnded):
            yield TextMessageEndEvent(message_id=ev.message_id)
        elif isinstance(ev, ToolCalled):
            yield ToolCallStartEvent(
                tool_call_id=ev.call_id, tool_call_name=ev.name, parent_message_id=ev.message_id
            )
            args = json.dumps(ev.arguments, ensure_ascii=False)
            yield ToolCallArgsEvent(tool_call_id=ev.call_id, delta=args)
            yield ToolCallEndEvent(tool_call_id=ev.call_id)
        elif isinstance(ev, ToolAnswered):
            content = (
                ev.error if ev.error is not None else json.dumps(ev.output, ensure_ascii=False)
            )
            yield ToolCallResultEvent(
                message_id=f"{ev.message_id}:result",
                tool_call_id=ev.call_id,
                content=content,
                role="tool",
            )
        elif isinstance(ev, ToolDenied):
            yield ToolCallResultEvent(
                message_id=f"{ev.call_id}:denied",
                tool_call_id=ev.call_id,
                content=f"ApprovalDenied: {ev.reason}",
                role="tool",
            )
        elif isinstance(ev, Status):
            doc = state.doc
            doc.update(status=ev.status, waiting_for=ev.waiting_for)
            for name, value in (("asked", ev.asked), ("emitted", ev.emitted)):
                if value is not None:
                    doc[name] = value
                else:
                    doc.pop(name, None)
            changed = state.event()
            if changed is not None:
                yield changed
        elif isinstance(ev, ApprovalAsked):
            interrupts = [
                Interrupt(
                    id=approval_id(ev.signal, call_id),
                    reason="tool_approval",
                    message=ev.prompt,
                    tool_call_id=call_id,
                    metadata={"tool": tool, "arguments": arguments},
                )
                for call_id, tool, arguments in ev.calls
            ]
            yield RunFinishedEvent(
                thread_id=thread_id,
                run_id=run_id,
                outcome=RunFinishedInterruptOutcome(interrupts=interrupts),
            )
            return
        elif isinstance(ev, Finished):
            if ev.status == "succeeded":
                yield RunFinishedEvent(
                    thread_id=thread_id,
                    run_id=run_id,
                    result=ev.result,
                    outcome=RunFinishedSuccessOutcome(),
                )
            else:
                yield RunErrorEvent(message=ev.error or f"the run {ev.status}", code=ev.status)
            return


class _State:
    """The run's state as the client holds it: the whole of it first
    (``STATE_SNAPSHOT``), then what changed (``STATE_DELTA``, a JSON Patch
    from what was sent to what is)."""

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {}
        self.sent: dict[str, Any] | None = None

    def event(self) -> StateSnapshotEvent | StateDeltaEvent | None:
        """The event that brings the client to :attr:`doc` (None: it has it)."""
        now = copy.deepcopy(self.doc)
        if self.sent is None:
            self.sent = now
            return StateSnapshotEvent(snapshot=now)
        patch = _patch(self.sent, now)
        self.sent = now
        if not patch:
            return None
        return StateDeltaEvent.model_validate({"type": EventType.STATE_DELTA, "delta": patch})


class _SortedDiff(DiffBuilder):  # type: ignore[misc]  # jsonpatch has no type hints
    """jsonpatch's diff with each object's keys taken in sorted order, so
    the same change is the same patch in every process: jsonpatch takes
    them from sets, whose order varies with the interpreter's hash seed,
    and a stream served again after a restart would differ."""

    def _compare_dicts(self, path: str, src: dict[str, Any], dst: dict[str, Any]) -> None:
        for key in sorted(src.keys() - dst.keys()):
            self._item_removed(path, str(key), src[key])
        for key in sorted(dst.keys() - src.keys()):
            self._item_added(path, str(key), dst[key])
        for key in sorted(src.keys() & dst.keys()):
            self._compare_values(path, key, src[key], dst[key])


def _patch(src: dict[str, Any], dst: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch (RFC 6902) from ``src`` to ``dst``, as
    ``jsonpatch.make_patch`` builds it, in a stable order."""
    builder = _SortedDiff(src, dst)
    builder._compare_values("", None, src, dst)
    return list(builder.execute())


async def _encoded(source: AsyncIterator[BaseEvent]) -> AsyncIterator[str]:
    encoder = EventEncoder()
    async for ev in source:
        yield encoder.encode(ev)


def _stream(api: Api, source: AsyncIterator[BaseEvent]) -> CountedStream:
    return CountedStream(
        _encoded(source),
        release=api,
        media_type=EventEncoder().get_content_type(),
        headers=_HEADERS,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(getattr(p, "text", "") or "" for p in content or ())


def _decisions(run: RunAgentInput) -> dict[str, dict[str, Any]]:
    """The approval answers ``resume`` carries, by signal: call id -> decision."""
    out: dict[str, dict[str, Any]] = {}
    for entry in run.resume or ():
        named = read_approval_id(entry.interrupt_id)
        if named is None:
            continue  # not an approval's: this server asked for nothing else
        signal, call_id = named
        payload = entry.payload if isinstance(entry.payload, dict) else {}
        if entry.status == "resolved" and payload.get("approved") is True:
            decision: dict[str, Any] = {"decision": "approve"}
        else:
            decision = {"decision": "deny"}
            if isinstance(payload.get("reason"), str) and payload["reason"]:
                decision["reason"] = payload["reason"]
        out.setdefault(signal, {})[call_id] = decision
    return out


async def run_agent(request: Request, agent_name: str | None = None) -> Response:
    """``POST /agents/{agent}/agui``: a ``RunAgentInput``; the turn's AG-UI stream."""
    api: Api = request.app.state.api
    name = agent_name if agent_name is not None else unquote(request.path_params["agent"])
    found = agent_of(api, name)
    if isinstance(found, Response):
        return found
    try:
        _, body = await read_body(request, api.max_body)
    except OverflowError as exc:
        return problem(413, str(exc))
    except ValueError as exc:
        return problem(422, str(exc), [FieldProblem(field="(body)", message=str(exc))])
    try:
        run = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        fields = [
            FieldProblem(field=".".join(str(x) for x in e["loc"]) or "(body)", message=e["msg"])
            for e in exc.errors()
        ]
        summary = "; ".join(f"{f.field}: {f.message}" for f in fields[:5])
        return problem(422, f"invalid RunAgentInput: {summary}", fields)
    users = [(i, m) for i, m in enumerate(run.messages) if m.role == "user"]
    if not users:
        message = "no user message: the last one is the turn to answer"
        return problem(
            422,
            f"invalid RunAgentInput: {message}",
            [FieldProblem(field="messages", message=message)],
        )
    at, asked = users[-1]
    problems = check_ids(run.thread_id, asked.id, ("threadId", f"messages[{at}].id"))
    if problems:
        summary = "; ".join(f"{p.field}: {p.message}" for p in problems)
        return problem(422, f"invalid RunAgentInput: {summary}", problems)
    turn = await put_turn(api, found, run.thread_id, asked.id, _text(asked.content), "threadId")
    if isinstance(turn, Response):
        return turn
    answers = _decisions(run)
    for signal, decisions in answers.items():
        try:
            await api.runner.signal(run.thread_id, signal, decisions)
        except ApprovalError as exc:
            return problem(
                422, str(exc), [FieldProblem(field="resume", message=str(exc))], code=exc.error_code
            )
        except StoreError:
            return problem(409, f"conversation {run.thread_id!r} takes no signals now")
    source = events(
        turn_events(api, run.thread_id, turn), run.thread_id, run.run_id, after=frozenset(answers)
    )

    async def opening() -> Response:
        return _stream(api, source)

    return await take_stream(api, opening)


async def run_events(request: Request) -> Response:
    """``GET /runs/{run_id}/agui``: a durable run's stream as AG-UI events
    (``threadId`` and ``runId`` are both the run's id)."""
    api: Api = request.app.state.api
    run_id = unquote(request.path_params["run_id"])

    async def opening() -> Response:
        first = await api.runner.get_run(run_id)
        source = ui_events(
            api.runner, first, poll=api.poll, live=api.execute, find_policy=api.policies.get
        )
        return _stream(api, events(source, run_id, run_id))

    return await take_stream(api, opening)
