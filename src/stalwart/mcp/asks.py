"""What an MCP server asks of its client during a tool call, answered durably.

A server may, while it runs a tool, ask the client's model for a completion
(``sampling/createMessage``), ask the client's user for input
(``elicitation/create``), and send log messages. Each is answered in the run
of the tool's call, inside that call's step:

- **Sampling** is a call of the model given to ``connect(model=...)`` (the
  run's own model), a recorded step under the tool's step. A call that runs
  again after a crash gets the model's recorded reply: the model is never
  asked twice for one request.
- **Elicitation** is ``ctx.ask`` under the tool's step: a durable wait for
  the signal :data:`ELICITATION`, with the server's message as the prompt
  and what it asks (its schema, or its URL) in ``about``, so it is listed
  with every other wait for a person (``stalwart runs waiting``, the HTTP
  API's pending waits, the inspector). The run is suspended; the signal's
  payload is the user's answer; the call runs again and, when the server
  asks the same, gets it from the ledger.
- **Log messages** are emitted (``ctx.emit``) as :class:`Log` values, so
  ``handle.events()`` and ``runner.stream(...)`` show them with the run.

The protocol does not say which call a server request belongs to, so it is
given to the one call in flight on the session; while several calls of one
toolbox are in flight, a server request is refused with an error saying so
(and a log message goes to the Python logger).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import mcp_types as types
from mcp.client.session import ClientRequestContext

import stalwart as sw

__all__ = ["ELICITATION", "Asks", "InFlight", "Log", "elicit_result"]

ELICITATION = "elicitation"
"""The signal an MCP server's question to the user waits for."""

_log = logging.getLogger("stalwart.mcp")


@dataclass(frozen=True, slots=True)
class Log:
    """A log message an MCP server sent during a tool call (``ctx.emit``-ed)."""

    server: str
    level: str
    logger: str | None
    data: Any


@dataclass(slots=True)
class InFlight:
    """A tool call being sent: its step's context, and how a server request
    answered in another task stops it (a durable wait suspends the run)."""

    ctx: sw.Context
    tool: str
    interrupt: asyncio.Future[BaseException] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    answering: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self, exc: BaseException) -> None:
        if not self.interrupt.done():
            self.interrupt.set_result(exc)

    @contextlib.contextmanager
    def answer(self) -> Iterator[None]:
        """While a server request of this call is being answered."""
        self.answering += 1
        self.idle.clear()
        try:
            yield
        finally:
            self.answering -= 1
            if not self.answering:
                self.idle.set()

    async def settled(self) -> None:
        """Until no request of this call is being answered: a model's reply
        still coming when a question stops the call is recorded, not lost."""
        if self.answering:
            await self.idle.wait()


class Asks:
    """The client's side of a server's requests, for one connection."""

    def __init__(self, server: str, model: Any | None) -> None:
        self.server = server
        self.model = model
        self.calls: list[InFlight] = []

    def _caller(self, what: str) -> InFlight | types.ErrorData:
        if len(self.calls) == 1:
            return self.calls[0]
        if not self.calls:
            why = f"{what} is answered only during a tool call of this client"
        else:
            why = (
                f"{what} arrived while {len(self.calls)} tool calls are in flight; "
                "stalwart.mcp cannot tell which call asks"
            )
        return types.ErrorData(code=types.INVALID_REQUEST, message=why)

    # -- sampling ------------------------------------------------------------------
    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        call = self._caller("sampling/createMessage")
        if isinstance(call, types.ErrorData):
            return call
        if self.model is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="this client has no model for sampling (stalwart.mcp.connect(model=...))",
            )
        observations = sampling_messages(params)
        try:
            with call.answer():
                replies = await call.ctx.call(self.model, observations=observations)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the model failed: {exc}")
        except BaseException as exc:  # the run suspends, halts or is cancelled
            return await _stopped(call, exc)
        return _sampled(replies, _model_name(self.model))

    # -- elicitation ---------------------------------------------------------------
    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        call = self._caller("elicitation/create")
        if isinstance(call, types.ErrorData):
            return call
        about: dict[str, Any] = {"server": self.server, "tool": call.tool}
        schema: dict[str, Any] | None = None
        if isinstance(params, types.ElicitRequestURLParams):
            about.update(mode="url", url=params.url)
        else:
            schema = json.loads(json.dumps(params.requested_schema))
            about.update(mode="form", schema=schema)
        try:
            with call.answer():
                answer = await call.ctx.ask(params.message, signal=ELICITATION, about=about)
            return elicit_result(answer, schema, f"{self.server}/{call.tool}")
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a wait suspends the run; a bad answer fails the call
            return await _stopped(call, exc)

    # -- logs ----------------------------------------------------------------------
    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        record = Log(self.server, params.level, params.logger, params.data)
        if len(self.calls) == 1:
            self.calls[0].ctx.emit(record)
        else:
            _log.info("MCP server %r logs (%s): %s", self.server, params.level, params.data)


async def _stopped(call: InFlight, exc: BaseException) -> types.ErrorData:
    """Stop the call with ``exc``, once the other requests of the call being
    answered are (the SDK would cancel them when this one answers an error)."""
    call.stop(exc)
    await call.settled()
    return types.ErrorData(code=types.INTERNAL_ERROR, message="the run stopped here")


def sampling_messages(params: types.CreateMessageRequestParams) -> list[sw.Message]:
    """A sampling request's conversation as the messages a model reads."""
    out: list[sw.Message] = []
    if params.system_prompt:
        out.append(sw.Message.system(params.system_prompt))
    for m in params.messages:
        parts: list[str | sw.Media] = []
        for block in m.content_as_list:
            if isinstance(block, types.TextContent):
                parts.append(block.text)
            elif isinstance(block, types.ImageContent | types.AudioContent):
                parts.append(sw.Media(block.mime_type, data=base64.b64decode(block.data)))
            else:  # tool use and tool results, read as their JSON
                parts.append(json.dumps(block.model_dump(mode="json", by_alias=True)))
        if m.role == "assistant":
            out.append(sw.Message.assistant(*parts, actor="mcp"))
        else:
            out.append(sw.Message.user(*parts))
    return out


def _sampled(replies: Any, model: str) -> types.CreateMessageResult | types.ErrorData:
    """The model's reply as a sampling result: its last message's first part."""
    said = [m for m in replies if isinstance(m, sw.Message) and m.parts and not m.is_action_call]
    if not said:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="the model gave no reply")
    reply = said[-1]
    part = reply.parts[0]
    content: types.TextContent | types.ImageContent | types.AudioContent
    content = types.TextContent(type="text", text=reply.text)
    if isinstance(part, sw.Media) and part.data is not None:
        data = base64.b64encode(part.data).decode("ascii")
        if part.mime_type.startswith("image/"):
            content = types.ImageContent(type="image", data=data, mime_type=part.mime_type)
        elif part.mime_type.startswith("audio/"):
            content = types.AudioContent(type="audio", data=data, mime_type=part.mime_type)
    return types.CreateMessageResult(
        role="assistant", content=content, model=model, stop_reason="endTurn"
    )


def _model_name(model: Any) -> str:
    name = getattr(model, "name", None)
    return name if isinstance(name, str) else type(model).__name__


def elicit_result(answer: Any, schema: dict[str, Any] | None, where: str) -> types.ElicitResult:
    """The signal's payload as the user's answer to an elicitation.

    ``{"action": "decline"}`` or ``{"action": "cancel"}`` declines or
    cancels; ``{"action": "accept", "content": {...}}`` or the content
    object itself accepts. Accepted content is checked against the schema
    the server asked with: a mismatch is a ``ValueError`` naming the field.
    """
    content = answer
    if isinstance(answer, dict) and answer.get("action") in ("decline", "cancel"):
        return types.ElicitResult(action="decline" if answer["action"] == "decline" else "cancel")
    if isinstance(answer, dict) and answer.get("action") == "accept":
        content = answer.get("content")
    if schema is None:  # a URL: the user went there
        return types.ElicitResult(action="accept")
    if not isinstance(content, dict):
        raise ValueError(
            f"the answer to the elicitation of {where} (signal {ELICITATION!r}) must be an "
            f"object of the fields asked for, not {json.dumps(content, default=str)[:200]}"
        )
    problems = [
        f"{'.'.join(str(p) for p in e.path) or '(answer)'}: {e.message}"
        for e in jsonschema.validators.validator_for(schema)(schema).iter_errors(content)
    ]
    if problems:
        raise ValueError(
            f"the answer to the elicitation of {where} (signal {ELICITATION!r}) does not fit "
            "what the server asked: " + "; ".join(problems)
        )
    return types.ElicitResult(action="accept", content=content)
