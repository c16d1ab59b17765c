"""The OpenAPI 3.1 document of an API: one start operation per policy, its
inputs' schema the one the policy validates with.

A policy's schema comes from its type hints and docstring (the pydantic
model :class:`~stalwart.core.schema.Signature` builds), the same one that
validates a start request, so the document and the server agree by
construction. Nested models land in ``components/schemas`` (pydantic's
``$defs``, re-pointed), named after the policy when two policies use one
name for different shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel

from ..core.policy import Policy
from .models import PolicyInfo, Problem, Run, RunPage, StartRun, Step

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"


def _schema(model: type[BaseModel], components: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``model``'s JSON schema, its ``$defs`` moved into ``components``."""
    schema = model.model_json_schema(ref_template=_REF, mode="validation")
    defs = schema.pop("$defs", {})
    renames: dict[str, str] = {}
    for name, sub in defs.items():
        target = name
        if target in components and components[target] != sub:
            target = f"{prefix}{name}"
        components[target] = sub
        if target != name:
            renames[name] = target
    if renames:
        schema = _renamed(schema, renames)
        for target in renames.values():
            components[target] = _renamed(components[target], renames)
    return schema


def _renamed(tree: Any, renames: dict[str, str]) -> Any:
    if isinstance(tree, list):
        return [_renamed(v, renames) for v in tree]
    if isinstance(tree, dict):
        out = {k: _renamed(v, renames) for k, v in tree.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[1]
            out["$ref"] = _REF.format(model=renames.get(name, name))
        return out
    return tree


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=ref)}}}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": _json("Problem")}


def openapi_document(
    policies: Sequence[Policy[Any, Any]], *, title: str, version: str, auth: bool
) -> dict[str, Any]:
    """The document for an API serving ``policies``."""
    components: dict[str, Any] = {}
    for model in (Run, RunPage, Step, Problem, PolicyInfo):
        components[model.__name__] = _schema(model, components)
    start_base = _schema(StartRun, components)
    paths: dict[str, Any] = {}
    errors = {
        "401": _problem("no bearer token, or not one of the server's"),
        "404": _problem("no such run"),
    }
    for pol in sorted(policies, key=lambda p: p.name):
        inputs_name = f"{_camel(pol.name)}Inputs"
        try:
            components[inputs_name] = _schema(pol.signature.model, components, _camel(pol.name))
        except Exception as exc:  # a hint pydantic cannot describe (an arbitrary class)
            components[inputs_name] = {
                "type": "object",
                "description": f"no JSON schema for {pol.name}'s inputs: {type(exc).__name__}",
            }
        components[inputs_name].pop("title", None)
        for prop in components[inputs_name].get("properties", {}).values():
            prop.pop("title", None)  # as a model sees it (Signature.json_schema)
        body = dict(start_base)
        body["properties"] = {
            **start_base["properties"],
            "inputs": {"$ref": _REF.format(model=inputs_name)},
        }
        if components[inputs_name].get("required"):
            body["required"] = ["inputs"]
        body["title"] = f"Start{_camel(pol.name)}"
        paths[f"/policies/{quote(pol.name, safe='')}/runs"] = {
            "post": {
                "operationId": f"start_{_ident(pol.name)}",
                "summary": f"Start a run of {pol.name}",
                "description": pol.description or "",
                "tags": ["policies"],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {
                    "201": {"description": "the run, created", "content": _json("Run")},
                    "200": {
                        "description": "the run that has this run_id (same inputs)",
                        "content": _json("Run"),
                    },
                    "401": errors["401"],
                    "409": _problem("the run_id exists with other inputs or another policy"),
                    "422": _problem("the body or an input is invalid: fields names each one"),
                },
            }
        }
    run_id = {
        "name": "run_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": "percent-encoded (a run id may contain /)",
    }
    paths["/policies"] = {
        "get": {
            "operationId": "list_policies",
            "summary": "The policies this API starts runs of, with their inputs' schemas",
            "tags": ["policies"],
            "responses": {
                "200": {
                    "description": "the policies",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "array",
                                "items": {"$ref": _REF.format(model="PolicyInfo")},
                            }
                        }
                    },
                },
                "401": errors["401"],
            },
        }
    }
    paths["/runs"] = {"get": _list_runs(errors)}
    paths["/runs/{run_id}"] = {
        "get": {
            "operationId": "get_run",
            "summary": "A run: status, result or error",
            "tags": ["runs"],
            "parameters": [run_id],
            "responses": {"200": {"description": "the run", "content": _json("Run")}, **errors},
        }
    }
    paths["/runs/{run_id}/steps"] = {
        "get": {
            "operationId": "get_steps",
            "summary": "A run's recorded steps, in the order they finished",
            "tags": ["runs"],
            "parameters": [run_id],
            "responses": {
                "200": {
                    "description": "the steps",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "array",
                                "items": {"$ref": _REF.format(model="Step")},
                            }
                        }
                    },
                },
                **errors,
            },
        }
    }
    paths["/runs/{run_id}/events"] = {"get": _events(run_id, errors)}
    paths["/runs/{run_id}/signals/{name}"] = {
        "post": {
            "operationId": "send_signal",
            "summary": "Send a signal: the run's wait_for(name) or ask() receives the body",
            "tags": ["runs"],
            "parameters": [
                run_id,
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": {"description": "any JSON value"}}},
            },
            "responses": {
                "202": {"description": "queued for the run", "content": _json("Run")},
                **errors,
                "409": _problem("the run has finished"),
            },
        }
    }
    paths["/runs/{run_id}/cancel"] = {
        "post": {
            "operationId": "cancel_run",
            "summary": "Cancel a run: it stops at its next await, within a heartbeat",
            "tags": ["runs"],
            "parameters": [run_id],
            "responses": {
                "202": {"description": "cancellation requested", "content": _json("Run")},
                **errors,
                "409": _problem("the run has finished"),
            },
        }
    }
    paths["/threads/{thread_id}/messages"] = {
        "post": {
            "operationId": "send_message",
            "summary": "Send a message to a conversation",
            "description": (
                "Body: agent (a served policy taking question and history), message (any "
                "JSON), message_id (optional: the same id is the same turn). The thread is "
                "started if new. The answer names the turn's run, whose result is the reply. "
                "Without --execute, a worker serving the thread's policies answers."
            ),
            "tags": ["threads"],
            "parameters": [
                {"name": "thread_id", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["agent", "message"],
                            "properties": {
                                "agent": {"type": "string"},
                                "message": {},
                                "message_id": {"type": "string"},
                            },
                        }
                    }
                },
            },
            "responses": {
                "202": {
                    "description": "the turn, queued: GET /runs/{turn_id} for the reply",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "thread_id": {"type": "string"},
                                    "turn_id": {"type": "string"},
                                },
                            }
                        }
                    },
                },
                "401": errors["401"],
                "409": _problem("the thread has ended, or is a run of another policy"),
                "422": _problem("a field is invalid"),
            },
        }
    }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(components.items()))},
    }
    if auth:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc


def _list_runs(errors: dict[str, Any]) -> dict[str, Any]:
    def q(name: str, kind: str, description: str) -> dict[str, Any]:
        return {"name": name, "in": "query", "schema": {"type": kind}, "description": description}

    return {
        "operationId": "list_runs",
        "summary": "Runs, newest first, a page at a time",
        "tags": ["runs"],
        "parameters": [
            q("status", "string", "pending, running, suspended, succeeded, failed, cancelled"),
            q("policy", "string", "the policy's name"),
            q("queue", "string", "the queue's name"),
            q("id_contains", "string", "literal text anywhere in the run id"),
            q("created_after", "number", "seconds since the epoch (inclusive)"),
            q("created_before", "number", "seconds since the epoch (exclusive)"),
            q("limit", "integer", "runs per page, 1 to 500 (default 50)"),
            q("cursor", "string", "the previous page's next"),
        ],
        "responses": {
            "200": {"description": "a page of runs", "content": _json("RunPage")},
            "401": errors["401"],
            "422": _problem("a parameter is invalid"),
        },
    }


def _events(run_id: dict[str, Any], errors: dict[str, Any]) -> dict[str, Any]:
    return {
        "operationId": "stream_events",
        "summary": "The run's events as Server-Sent Events, resumable with Last-Event-ID",
        "description": (
            "Events: status (where the run stands), step (a recorded step, a Step), "
            "end (the final Run; the stream closes), and, for a run executing in the API "
            "process, delta, emit and call (live only, no id). Each event's data is one line "
            "of JSON. Reconnect with the Last-Event-ID header (or ?last_event_id=) to get "
            "every step after it."
        ),
        "tags": ["runs"],
        "parameters": [
            run_id,
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
            },
            {
                "name": "last_event_id",
                "in": "query",
                "required": False,
                "schema": {"type": "string"},
            },
        ],
        "responses": {
            "200": {
                "description": "an event stream",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **errors,
            "400": _problem("Last-Event-ID is not an id this API sent"),
            "503": {
                **_problem("this process serves as many streams as it may (max_streams)"),
                "headers": {
                    "Retry-After": {
                        "description": "seconds to wait before trying again",
                        "schema": {"type": "integer"},
                    }
                },
            },
        },
    }


def _camel(name: str) -> str:
    parts = "".join(c if c.isalnum() else " " for c in name).split()
    return "".join(p[:1].upper() + p[1:] for p in parts) or "Policy"


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
