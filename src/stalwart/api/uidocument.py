"""The OpenAPI description of the UI protocols' routes (:mod:`.aisdk`,
:mod:`.agui`): what they take and answer, each stream's events as one
``data`` line of JSON (the protocols' own types, named, not repeated here:
their definitions are the SDKs')."""

from __future__ import annotations

from typing import Any

__all__ = ["ui_paths"]

_PROBLEM = {"$ref": "#/components/schemas/Problem"}
_RUN_ID = {"$ref": "#/components/schemas/RunId"}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _PROBLEM}}}


def _stream(description: str, protocol: str) -> dict[str, Any]:
    event = {
        "type": "object",
        "required": ["data"],
        "properties": {
            "data": {
                "type": "string",
                "description": f"one {protocol} event as JSON ([DONE] ends an AI SDK stream)",
            }
        },
    }
    return {"description": description, "content": {"text/event-stream": {"schema": event}}}


def _busy() -> dict[str, Any]:
    return {
        **_problem("this process serves as many streams as it may (max_streams)"),
        "headers": {
            "Retry-After": {
                "description": "seconds to wait before trying again",
                "schema": {"type": "integer"},
            }
        },
    }


def ui_paths(agents: list[str], agui: bool) -> dict[str, Any]:
    """The paths of the UI protocols' routes; the conversation routes only
    when some served policy takes a ``question`` (``agents``), AG-UI's only
    when its package is installed (``agui``)."""
    unauthorized = _problem("no bearer token, or not one of the server's")
    too_large = _problem("the body is larger than the server takes (1 MiB by default)")
    run_id = {
        "name": "run_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1},
        "description": "percent-encoded (a run id may contain /)",
    }
    agent = {"name": "agent", "in": "path", "required": True, "schema": {"enum": agents}}
    paths: dict[str, Any] = {
        "/runs/{run_id}/aisdk": {
            "get": {
                "operationId": "stream_aisdk",
                "summary": "A run's events as the AI SDK's UI message stream",
                "tags": ["ui protocols"],
                "parameters": [run_id],
                "responses": {
                    "200": _stream("the run from its start, as UI message chunks", "AI SDK"),
                    "401": unauthorized,
                    "404": _problem("no such run"),
                    "503": _busy(),
                },
            }
        }
    }
    if agui:
        paths["/runs/{run_id}/agui"] = {
            "get": {
                "operationId": "stream_agui",
                "summary": "A run's events as an AG-UI run",
                "tags": ["ui protocols"],
                "parameters": [run_id],
                "responses": {
                    "200": _stream("the run from its start, as AG-UI events", "AG-UI"),
                    "401": unauthorized,
                    "404": _problem("no such run"),
                    "503": _busy(),
                },
            }
        }
    if not agents:
        return paths
    text_part = {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": {"type": "string", "minLength": 1}},
    }
    # The SDK's messages: the user's need a text part; the assistant's carry
    # the tool approvals answered (their id names the turn they answer).
    user = {
        "type": "object",
        "required": ["id", "role", "parts"],
        "properties": {
            "id": _RUN_ID,
            "role": {"const": "user"},
            "parts": {"type": "array", "items": {"type": "object"}, "contains": text_part},
        },
    }
    assistant = {
        "type": "object",
        "required": ["id", "role", "parts"],
        "properties": {
            "id": {"type": "string"},
            "role": {"const": "assistant"},
            "parts": {"type": "array", "items": {"type": "object"}},
        },
    }
    refused = {
        "401": unauthorized,
        "404": _problem("no such agent, or no such turn to continue"),
        "409": _problem("the conversation is a run of another policy, or has ended"),
        "413": too_large,
        "422": _problem("the body is invalid: fields names each problem"),
        "503": _busy(),
    }
    paths["/agents/{agent}/aisdk"] = {
        "post": {
            "operationId": "chat_aisdk",
            "summary": "A turn of a conversation, driven by the AI SDK's useChat",
            "description": (
                "The body DefaultChatTransport sends: id (the conversation's id) and "
                "messages. A last message from the user is a new turn (its id the turn's: "
                "the same id again is the same turn); one from the assistant carries "
                "tool approval answers. Answered with the turn's UI message stream."
            ),
            "tags": ["ui protocols"],
            "parameters": [agent],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["id", "messages"],
                            "properties": {
                                "id": _RUN_ID,
                                "messages": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"oneOf": [user, assistant]},
                                },
                                "trigger": {"type": "string"},
                            },
                        }
                    }
                },
            },
            "responses": {
                "200": _stream("the turn, as UI message chunks", "AI SDK"),
                **refused,
            },
        }
    }
    paths["/agents/{agent}/aisdk/{conversation_id}/stream"] = {
        "get": {
            "operationId": "resume_aisdk",
            "summary": "The turn being answered, from its start (the AI SDK's resumeStream)",
            "tags": ["ui protocols"],
            "parameters": [
                agent,
                {"name": "conversation_id", "in": "path", "required": True, "schema": _RUN_ID},
            ],
            "responses": {
                "200": _stream("the turn, as UI message chunks", "AI SDK"),
                "204": {"description": "no turn of the conversation is being answered"},
                "401": unauthorized,
                "404": _problem("no such agent"),
                "422": _problem("the conversation id is not one a conversation may have"),
                "503": _busy(),
            },
        }
    }
    if agui:
        paths["/agents/{agent}/agui"] = {
            "post": {
                "operationId": "run_agui",
                "summary": "A turn of a conversation, as an AG-UI run",
                "description": (
                    "AG-UI's RunAgentInput: threadId is the conversation's id, the last "
                    "user message the turn (the same id again is the same turn, streamed "
                    "again from its start); resume answers the tool approvals a run was "
                    "interrupted for."
                ),
                "tags": ["ui protocols"],
                "parameters": [agent],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _run_agent_input()}},
                },
                "responses": {"200": _stream("the turn, as AG-UI events", "AG-UI"), **refused},
            }
        }
    return paths


def _closed(required: list[str], **properties: Any) -> dict[str, Any]:
    # Open: AG-UI's types take fields of their own (metadata, names, ...).
    return {"type": "object", "required": required, "properties": properties}


def _run_agent_input() -> dict[str, Any]:
    """AG-UI's ``RunAgentInput`` as this server reads it: the turn is the
    last user message (text content), so one is required."""
    text = {"type": "string"}
    call = _closed(
        ["id", "type", "function"],
        id=text,
        type={"const": "function"},
        function=_closed(["name", "arguments"], name=text, arguments=text),
    )
    user = _closed(["id", "role", "content"], id=_RUN_ID, role={"const": "user"}, content=text)
    messages = [
        user,
        _closed(
            ["id", "role"],
            id=text,
            role={"const": "assistant"},
            content={"type": ["string", "null"]},
            toolCalls={"type": "array", "items": call},
        ),
        _closed(
            ["id", "role", "content", "toolCallId"],
            id=text,
            role={"const": "tool"},
            content=text,
            toolCallId=text,
        ),
        _closed(
            ["id", "role", "content"], id=text, role={"enum": ["system", "developer"]}, content=text
        ),
    ]
    resume = _closed(
        ["interruptId", "status"],
        interruptId=text,
        status={"enum": ["resolved", "cancelled"]},
        payload={},
    )
    return _closed(
        ["threadId", "runId", "messages"],
        threadId=_RUN_ID,
        runId=text,
        parentRunId=text,
        protocolVersion=text,
        state={},
        messages={"type": "array", "items": {"oneOf": messages}, "contains": user},
        tools={
            "type": "array",
            "items": _closed(["name", "description"], name=text, description=text, parameters={}),
        },
        context={
            "type": "array",
            "items": _closed(["description", "value"], description=text, value=text),
        },
        forwardedProps={},
        resume={"type": "array", "items": resume},
    )
