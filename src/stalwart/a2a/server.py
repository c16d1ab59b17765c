"""A policy, an ``llm.Agent``, served as an A2A agent.

The official SDK (``a2a-sdk``) speaks the protocol: its JSON-RPC routes and
agent-card route, and its client on the other side. Stalwart plugs in one
:class:`TaskHandler`, the SDK's ``RequestHandler``, over a
:class:`~stalwart.Runner`, instead of the SDK's in-memory task store: a
task is a durable run (:mod:`.tasks`), so everything a task is lives in the
ledger, and a server that restarted answers for it.

- ``message/send``, ``message/stream``: the first message of a task starts a
  run of the served policy under an id made from its ``messageId`` (the same
  message again is the same run). A message naming a ``taskId`` answers that
  task's wait: the run waits for a signal (``ctx.ask``, ``ctx.wait_for``, a
  tool approval) and the message's content is the signal's payload. The
  answer comes when the run ends or waits again (``input-required``); a
  stream sends a status update for each ``ctx.emit`` on the way (and a
  model's text as it streams, appended to the result artifact), then the
  result as an artifact, then the final status.
- ``tasks/get``: the task read from the run's record.
- ``tasks/cancel``: the runner's cancel (S9).
- ``tasks/resubscribe``: the stream of a task still going.
- ``tasks/list``: the tasks of this agent, newest first, a page at a time
  (``pageSize``, ``pageToken``, ``nextPageToken``), narrowed by
  ``contextId``, ``status`` and ``statusTimestampAfter``; ``totalSize``
  counts every task that matches; the results (artifacts) only with
  ``includeArtifacts``.

Push notifications and an extended card are not offered.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers import RequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from starlette.applications import Starlette

import stalwart as sw
from stalwart.core.approval import APPROVAL_PREFIX
from stalwart.core.events import Emitted, RunFinished, TextDelta
from stalwart.core.ledger import TERMINAL, RunRecord
from stalwart.core.policy import as_policy

from .runs import ConversationRuns, PolicyRuns, TaskRuns
from .tasks import (
    RESULT_ARTIFACT,
    TASK_PREFIX,
    agent_message,
    answer_uid,
    signal_of,
    state_of,
    task_of,
    value_of,
)

__all__ = ["TaskHandler", "agent_card", "build_app"]

PROTOCOL_BINDING = "JSONRPC"
PROTOCOL_VERSION = "1.0"


def agent_card(target: Any, url: str, *, description: str | None = None) -> AgentCard:
    """The agent card of ``target`` (a policy or an ``llm.Agent``) served at
    ``url``: its name and description, and its skills: an agent's tools, each
    a skill, or the policy itself."""
    pol = as_policy(target)
    tools = [as_policy(t) for t in getattr(target, "options", ())]
    skills = [
        AgentSkill(id=t.name, name=t.name, description=t.description or t.name, tags=["tool"])
        for t in tools
    ] or [
        AgentSkill(
            id=pol.name, name=pol.name, description=pol.description or pol.name, tags=["policy"]
        )
    ]
    return AgentCard(
        name=pol.name,
        description=description or pol.description or pol.name,
        version=sw.__version__,
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding=PROTOCOL_BINDING, protocol_version=PROTOCOL_VERSION
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )


#: Runs read at once while listing tasks.
SCAN = 500


def page_token(created_at: float, run_id: str) -> str:
    """The ``nextPageToken`` after the task (run) ``run_id``: where the
    next page starts, as the store pages runs, newest first."""
    text = json.dumps([created_at, run_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def read_page_token(token: str) -> tuple[float, str]:
    """A ``pageToken`` this server gave; InvalidParamsError for any other."""
    refused = InvalidParamsError(f"pageToken {token[:100]!r} is not a token this server gave")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise refused from None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not isinstance(value[0], int | float)
        or isinstance(value[0], bool)
        or not math.isfinite(value[0])
        or not isinstance(value[1], str)
    ):
        raise refused
    return float(value[0]), value[1]


def _listed(rec: RunRecord, waiter: RunRecord, status: int, since: int | None) -> bool:
    """Whether ``tasks/list`` lists the task: of the state asked for (none:
    any), its status changed after ``since`` (nanoseconds; none: any time)."""
    if status != TaskState.TASK_STATE_UNSPECIFIED and state_of(rec, waiter) != status:
        return False
    changed = int(max(rec.updated_at, waiter.updated_at) * 1e9)  # as task_of stamps it
    return since is None or changed > since


def _answer_of(message: Message, signal: str) -> Any:
    """The signal's payload a message answering a wait carries: its data, or
    its text; a tool approval reads ``approve``/``deny`` (or yes/no) as such."""
    value = value_of(message.parts)
    if signal.startswith(APPROVAL_PREFIX) and isinstance(value, str):
        word = value.strip().lower()
        if word in ("approve", "approved", "yes", "true"):
            return True
        if word in ("deny", "denied", "no", "false"):
            return False
    return value


class TaskHandler(RequestHandler):
    """The SDK's request handler over a runner: tasks are runs (``runs``
    says which: :class:`~.runs.PolicyRuns`, :class:`~.runs.ConversationRuns`)."""

    def __init__(self, runs: TaskRuns, runner: sw.Runner, card: AgentCard) -> None:
        self.runs = runs
        self.runner = runner
        self.card = card

    # -- finding a task ------------------------------------------------------
    async def _find(self, task_id: str) -> RunRecord:
        """The run a client's task id names: one this server made, of what it
        serves; anything else is not found (a client never names other runs)."""
        missing = TaskNotFoundError(f"no task {task_id[:100]!r}")
        if not task_id.startswith(TASK_PREFIX):
            raise missing
        try:
            rec = await self.runner.get_run(task_id)
        except sw.RunNotFound:
            raise missing from None
        if not self.runs.owns(rec):
            raise missing
        return rec

    async def _task(self, rec: RunRecord) -> Task:
        waiter = await self.runs.waiter(rec)
        return await task_of(self.runner, rec, context_id=self.runs.context(rec), waiter=waiter)

    # -- sending ------------------------------------------------------------
    async def _submit(self, message: Message) -> tuple[str, asyncio.Queue[Any]]:
        """Start the task the message begins, or answer the wait of the task
        it names; the task's id, and a queue hearing its events from before
        it moves on."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        if message.task_id:
            return await self._answer(message, queue), queue
        try:
            task_id = await self.runs.start(message, queue)
        except sw.InputMismatchError:
            raise InvalidParamsError(
                f"message.messageId {message.message_id[:100]!r} was already sent with "
                "other content"
            ) from None
        except (ValueError, TypeError, sw.SerializationError) as exc:
            raise InvalidParamsError(str(exc)) from None
        return task_id, queue

    async def _answer(self, message: Message, queue: asyncio.Queue[Any]) -> str:
        rec = await self._find(message.task_id)
        waiter = await self.runs.waiter(rec)
        signal = signal_of(waiter) if rec.status not in TERMINAL else None
        if signal is None and rec.status in TERMINAL:
            raise InvalidParamsError(
                f"message.taskId: task {rec.id!r} is not waiting for input (its run is "
                f"{rec.status}); send a message without taskId to start a new task"
            )
        if signal is None:
            raise InvalidParamsError(
                f"message.taskId: task {rec.id!r} is not waiting for input now (its run is "
                f"{rec.status}): another message answered it first, or it has not asked "
                "yet; nothing was sent (tasks/get says where it stands)"
            )
        payload = _answer_of(message, signal)
        watched = self.runs.watched(rec)
        self.runner.listen(watched, queue)
        try:
            # The message's id names the answer: the same message again (a
            # retry) is delivered once, never to the task's next question.
            # Sent only while the wait is open: of two clients answering one
            # question at once, the second is refused, never delivered.
            await self.runner.signal(
                waiter.id, signal, payload, uid=answer_uid(rec.id, message), wait_fence=waiter.fence
            )
        except sw.SignalRefused:
            self.runner.unlisten(watched, queue)
            raise InvalidParamsError(
                f"message.taskId: task {rec.id!r} no longer waits for this input: another "
                "message answered it first; nothing was sent (tasks/get says what it "
                "waits for now)"
            ) from None
        except (sw.StalwartError, ValueError) as exc:
            self.runner.unlisten(watched, queue)
            raise InvalidParamsError(f"message.parts: {exc}") from None
        return rec.id

    async def _settled(self, task_id: str) -> Task | None:
        """The task, if it has ended or waits for input; else None."""
        rec = await self.runner.get_run(task_id)
        waiter = await self.runs.waiter(rec)
        if rec.status in TERMINAL or signal_of(waiter) is not None:
            return await task_of(self.runner, rec, context_id=self.runs.context(rec), waiter=waiter)
        return None

    async def _follow(
        self, task_id: str, queue: asyncio.Queue[Any]
    ) -> AsyncGenerator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
        """The task's updates until it ends or waits for input: a working
        status for each value its run emits, then the result artifact and the
        final status, or the input-required status. Live events wake it; the
        store, read every poll interval, says where the task stands."""
        runner = self.runner
        rec = await runner.get_run(task_id)
        watched = self.runs.watched(rec)
        context = self.runs.context(rec)
        n = 0
        streamed = False
        try:
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), runner.poll_interval)
                except TimeoutError:
                    event = None
                if isinstance(event, Emitted):
                    n += 1
                    msg = agent_message(task_id, context, event.value, f"{task_id}-emit-{n}")
                    status = TaskStatus(state=TaskState.TASK_STATE_WORKING, message=msg)
                    yield TaskStatusUpdateEvent(task_id=task_id, context_id=context, status=status)
                    continue
                if isinstance(event, TextDelta):
                    # Text as a model writes it, into the result artifact; the
                    # final result replaces it whole.
                    chunk = Artifact(artifact_id=RESULT_ARTIFACT, parts=[Part(text=event.text)])
                    yield TaskArtifactUpdateEvent(
                        task_id=task_id, context_id=context, artifact=chunk, append=streamed
                    )
                    streamed = True
                    continue
                if event is not None and not isinstance(event, RunFinished):
                    continue
                task = await self._settled(task_id)
                if task is not None:
                    if task.artifacts:
                        yield TaskArtifactUpdateEvent(
                            task_id=task_id,
                            context_id=context,
                            artifact=task.artifacts[0],
                            last_chunk=True,
                        )
                    yield TaskStatusUpdateEvent(
                        task_id=task_id, context_id=context, status=task.status
                    )
                    return
        finally:
            runner.unlisten(watched, queue)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        task_id, queue = await self._submit(params.message)
        if not params.configuration.return_immediately:
            async for _ in self._follow(task_id, queue):
                pass
        else:
            self.runner.unlisten(self.runs.watched(await self.runner.get_run(task_id)), queue)
        return await self._task(await self.runner.get_run(task_id))

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        task_id, queue = await self._submit(params.message)
        task = await self._task(await self.runner.get_run(task_id))
        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED and not task.artifacts:
            task.status.state = TaskState.TASK_STATE_WORKING  # the answer moves it on
        yield task
        async for update in self._follow(task_id, queue):
            yield update

    # -- reading and cancelling ------------------------------------------------
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        return await self._task(await self._find(params.id))

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        size = params.page_size if params.HasField("page_size") else 50
        if not 1 <= size <= 100:
            raise InvalidParamsError(f"pageSize: 1 to 100, not {size}")
        after = read_page_token(params.page_token) if params.page_token else None
        since = (
            params.status_timestamp_after.ToNanoseconds()
            if params.HasField("status_timestamp_after")
            else None
        )
        try:
            filters = self.runs.listing(params.context_id)
        except (ValueError, TypeError) as exc:
            raise InvalidParamsError(f"contextId: {exc}") from None
        # Every task that matches is counted (``totalSize``); the page is the
        # first ``size`` of them older than the token's, newest first. A
        # task's state is read from its records (and its conversation's).
        page: list[tuple[RunRecord, RunRecord]] = []
        total, more, before = 0, False, None
        while True:
            runs = await self.runner.list_runs(limit=SCAN, before=before, **filters)
            for rec in runs:
                if not self.runs.owns(rec):
                    continue
                waiter = await self.runs.waiter(rec)
                if not _listed(rec, waiter, params.status, since):
                    continue
                total += 1
                if after is None or (rec.created_at, rec.id) < after:
                    if len(page) < size:
                        page.append((rec, waiter))
                    else:
                        more = True
            if len(runs) < SCAN:
                break
            before = (runs[-1].created_at, runs[-1].id)
        tasks = [
            await task_of(self.runner, rec, context_id=self.runs.context(rec), waiter=waiter)
            for rec, waiter in page
        ]
        if not params.include_artifacts:  # A2A: left out unless asked for
            for task in tasks:
                del task.artifacts[:]
        last = page[-1][0] if page and more else None
        return ListTasksResponse(
            tasks=tasks,
            page_size=size,
            total_size=total,
            next_page_token=page_token(last.created_at, last.id) if last is not None else "",
        )

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        rec = await self._find(params.id)
        if rec.status in TERMINAL:
            raise TaskNotCancelableError(f"task {rec.id!r} has ended ({rec.status})")
        await self.runner.cancel(rec.id)
        for _ in range(int(10 / self.runner.poll_interval)):
            rec = await self.runner.get_run(rec.id)
            if rec.status in TERMINAL:
                break
            await asyncio.sleep(self.runner.poll_interval)
        task = await self._task(rec)
        if rec.status not in TERMINAL:  # stops at its next await (S9)
            task.status.state = TaskState.TASK_STATE_CANCELED
        return task

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        rec = await self._find(params.id)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.runner.listen(self.runs.watched(rec), queue)
        task = await self._task(rec)
        yield task
        if rec.status in TERMINAL or task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            self.runner.unlisten(self.runs.watched(rec), queue)
            return
        async for update in self._follow(rec.id, queue):
            yield update

    # -- not offered -------------------------------------------------------------
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError


def build_app(
    target: Any,
    runner: sw.Runner,
    *,
    url: str,
    description: str | None = None,
    conversation: bool = False,
) -> Starlette:
    """The ASGI app serving ``target`` as an A2A agent at ``url`` (JSON-RPC at
    ``/``, the card at ``/.well-known/agent-card.json``), its tasks runs of
    ``runner``, which the app opens and closes with its lifespan. Give the
    runner ``serving=True`` (and a durable store) so that it resumes the tasks
    a previous server left unfinished.

    ``conversation=True`` (an agent taking ``question`` and ``history``, as
    ``llm.Agent`` does): each ``contextId`` is a durable conversation and each
    task a turn of it, answered with the context's earlier messages as history.
    """
    card = agent_card(target, url, description=description)
    runs: TaskRuns = (
        ConversationRuns(target, runner) if conversation else PolicyRuns(target, runner)
    )
    handler = TaskHandler(runs, runner, card)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await runner.open()
        try:
            yield
        finally:
            await runner.close()

    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes, lifespan=lifespan)
