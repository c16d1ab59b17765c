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
from importlib.util import find_spec
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from ..core.message import Media
from ..core.policy import Policy
from ..stores.search import MAX_QUERY_CHARS, WORD_PATTERN
from .events import CURSOR_PATTERN
from .models import (
    PolicyInfo,
    Problem,
    Run,
    RunPage,
    StartRun,
    Step,
    StepPage,
    VersionList,
    printable_pattern,
    run_id_schema,
    tag_filter_schema,
    tags_schema,
)
from .routes import (
    DEFAULT_LIMIT,
    LIST_CURSOR_PATTERN,
    MAX_LIMIT,
    MAX_SIGNAL_NAME,
    MAX_VERSION,
    NUMBER_PATTERN,
    STATUSES,
)
from .uidocument import ui_paths

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"


class _AsValidated(GenerateJsonSchema):
    """Pydantic's schemas, plus what its validation of a dataclass does and
    its schema leaves out: a plain dataclass refuses fields it lacks
    (``additionalProperties: false``), and a :class:`Media` part has exactly
    one of ``data`` and ``url``."""

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        out = super().dataclass_schema(schema)
        cls = schema["cls"]
        config = getattr(cls, "__pydantic_config__", None)
        extra = config.get("extra", "ignore") if isinstance(config, dict) else "forbid"
        if extra == "forbid" and out.get("type") == "object":
            out.setdefault("additionalProperties", False)
        if cls is Media and isinstance(out.get("properties"), dict):
            return _one_of_data_or_url(out)
        return out


def _one_of_data_or_url(media: dict[str, Any]) -> dict[str, Any]:
    """Media as two shapes: ``data`` given and ``url`` null or absent, or the
    other way round (each a whole object, which a generator of examples reads
    as well as a validator)."""
    props = media["properties"]

    def given(name: str) -> Any:
        options = props[name].get("anyOf", [props[name]])
        return next((o for o in options if o.get("type") != "null"), {"type": "string"})

    shapes = []
    for name, other in (("data", "url"), ("url", "data")):
        shapes.append(
            {
                "type": "object",
                "required": sorted({*media.get("required", []), name}),
                "properties": {**props, name: given(name), other: {"type": "null"}},
                "additionalProperties": False,
            }
        )
    return {"description": media.get("description", ""), "anyOf": shapes}


def _schema(model: type[BaseModel], components: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``model``'s JSON schema, its ``$defs`` moved into ``components``."""
    schema = model.model_json_schema(
        ref_template=_REF, mode="validation", schema_generator=_AsValidated
    )
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


def _agents(policies: Sequence[Policy[Any, Any]]) -> list[str]:
    """The policies a conversation may name as its agent (they take a question)."""
    return sorted(p.name for p in policies if "question" in {q.name for q in p.signature.params})


def openapi_document(
    policies: Sequence[Policy[Any, Any]], *, title: str, version: str, auth: bool
) -> dict[str, Any]:
    """The document for an API serving ``policies``."""
    components: dict[str, Any] = {}
    for model in (Run, RunPage, Step, StepPage, Problem, PolicyInfo, VersionList):
        components[model.__name__] = _schema(model, components)
    components["RunId"] = run_id_schema()
    components["Tags"] = tags_schema()
    start_base = _schema(StartRun, components)
    start_base["properties"]["tags"] = {
        "anyOf": [{"$ref": _REF.format(model="Tags")}, {"type": "null"}],
        "default": None,
        "description": start_base["properties"]["tags"]["description"],
    }
    start_base["properties"]["run_id"] = {
        "anyOf": [{"$ref": _REF.format(model="RunId")}, {"type": "null"}],
        "default": None,
        "description": start_base["properties"]["run_id"]["description"],
    }
    paths: dict[str, Any] = {}
    errors = {
        "401": _problem("no bearer token, or not one of the server's"),
        "404": _problem("no such run"),
    }
    too_large = _problem("the body is larger than the server takes (1 MiB by default)")
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
                    "413": too_large,
                    "422": _problem("the body or an input is invalid: fields names each one"),
                },
            }
        }
    run_id = {
        "name": "run_id",
        "in": "path",
        "required": True,
        # Any run's id, a child's (``parent~1/0``) too: not only the ids a user may choose.
        "schema": {"type": "string", "minLength": 1},
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
    paths["/runs/{run_id}/steps"] = {"get": _get_steps(run_id, errors)}
    paths["/runs/{run_id}/events"] = {"get": _events(run_id, errors)}
    paths["/runs/{run_id}/signals/{name}"] = {
        "post": {
            "operationId": "send_signal",
            "summary": "Send a signal: the run's wait_for(name) or ask() receives the body",
            "tags": ["runs"],
            "parameters": [
                run_id,
                {
                    "name": "name",
                    "in": "path",
                    "required": True,
                    "schema": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_SIGNAL_NAME,
                        "pattern": f"^{printable_pattern()}*$",
                    },
                    "description": f"1 to {MAX_SIGNAL_NAME} printable characters",
                },
            ],
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": {"description": "any JSON value"}}},
            },
            "responses": {
                "202": {"description": "queued for the run", "content": _json("Run")},
                **errors,
                "409": _problem("the run has finished"),
                "413": too_large,
                "422": _problem("the name, or the body, is invalid"),
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
    paths["/versions"] = {
        "get": {
            "operationId": "list_versions",
            "summary": "The application versions workers run: latest, retired, live workers",
            "tags": ["versions"],
            "responses": {
                "200": {"description": "the versions", "content": _json("VersionList")},
                "401": errors["401"],
            },
        }
    }
    version_param = {
        "name": "version",
        "in": "path",
        "required": True,
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_VERSION,
            "pattern": r"^[^\s\x00-\x1f\x7f]+$",
        },
    }
    for word, summary in (
        ("latest", "Send new runs to this version's workers"),
        ("retire", "Retire this version: its workers take no more runs"),
    ):
        paths[f"/versions/{{version}}/{word}"] = {
            "post": {
                "operationId": f"{word}_version" if word == "retire" else "set_latest_version",
                "summary": summary,
                "tags": ["versions"],
                "parameters": [version_param],
                "responses": {
                    "200": {"description": "the versions", "content": _json("VersionList")},
                    "401": errors["401"],
                    "422": _problem("not a version: empty, too long, or with spaces"),
                },
            }
        }
    agents = _agents(policies)
    if agents:  # else no message can be sent: no operation to document
        paths["/conversations/{conversation_id}/messages"] = _messages(agents, too_large)
    paths.update(ui_paths(agents, agui=find_spec("ag_ui") is not None))
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


def _messages(agents: list[str], too_large: dict[str, Any]) -> dict[str, Any]:
    run_id = {"$ref": _REF.format(model="RunId")}
    return {
        "post": {
            "operationId": "send_message",
            "summary": "Send a message to a conversation",
            "description": (
                "Body: agent (a served policy taking question and history), message (any "
                "JSON), message_id (optional: the same id is the same turn). The "
                "conversation is started if new. The answer names the turn's run, whose result "
                "is the reply. "
                "Without --execute, a worker serving the conversation's policies answers."
            ),
            "tags": ["conversations"],
            "parameters": [
                {"name": "conversation_id", "in": "path", "required": True, "schema": run_id}
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["agent", "message"],
                            "properties": {
                                "agent": {"enum": agents},
                                "message": {},
                                "message_id": {"anyOf": [run_id, {"type": "null"}]},
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
                                    "conversation_id": {"type": "string"},
                                    "turn_id": {"type": "string"},
                                },
                            }
                        }
                    },
                },
                "401": _problem("no bearer token, or not one of the server's"),
                "409": _problem("the thread has ended, or is a run of another policy"),
                "413": too_large,
                "422": _problem("a field is invalid"),
            },
        }
    }


def _q(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    # Every parameter, given, has a value: ``?created_after=`` is a 422.
    return {"name": name, "in": "query", "schema": schema, "description": description}


def _paging(what: str) -> list[dict[str, Any]]:
    """``limit`` and ``cursor``, as ``GET /runs`` and a run's steps take them."""
    return [
        _q(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            f"{what} per page, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})",
        ),
        _q(
            "cursor",
            {"type": "string", "pattern": LIST_CURSOR_PATTERN},
            "the previous page's next",
        ),
    ]


def _get_steps(run_id: dict[str, Any], errors: dict[str, Any]) -> dict[str, Any]:
    return {
        "operationId": "get_steps",
        "summary": "A run's recorded steps, oldest first, a page at a time",
        "description": (
            "Steps in the order they finished, the first page first: pass a page's next "
            "as ?cursor= for the steps after it (null: the page holds the latest step). "
            "step_count, earlier and later say where the page sits. A page reads its own "
            "steps only, however long the run."
        ),
        "tags": ["runs"],
        "parameters": [run_id, *_paging("steps")],
        "responses": {
            "200": {"description": "a page of steps", "content": _json("StepPage")},
            **errors,
            "422": _problem("limit or cursor is invalid"),
        },
    }


def _list_runs(errors: dict[str, Any]) -> dict[str, Any]:
    text = {"type": "string", "minLength": 1}
    # A query value is text: the number as JSON writes one (no "inf", "nan", "1_0").
    seconds = {"type": "number", "pattern": NUMBER_PATTERN}
    return {
        "operationId": "list_runs",
        "summary": "Runs, newest first, a page at a time",
        "tags": ["runs"],
        "parameters": [
            _q("status", {"enum": list(STATUSES)}, "where the runs stand"),
            _q("policy", text, "the policy's name"),
            _q("queue", text, "the queue's name"),
            _q("id_contains", text, "literal text anywhere in the run id"),
            _q("created_after", seconds, "seconds since the epoch (inclusive)"),
            _q("created_before", seconds, "seconds since the epoch (exclusive)"),
            {
                **_q(
                    "tag",
                    tag_filter_schema(),
                    "key:value, repeatable: only runs with every tag given",
                ),
                "style": "form",
                "explode": True,
            },
            _q(
                "text",
                {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_CHARS,
                    "pattern": WORD_PATTERN,
                },
                "words (letters or digits, Unicode's): only runs whose inputs, result "
                "or error hold every one (whole words, any case; refused on an encrypted store)",
            ),
            *_paging("runs"),
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
                "schema": {"type": "string", "pattern": CURSOR_PATTERN},
                "description": "the id of the last event read; wins over last_event_id",
            },
            {
                "name": "last_event_id",
                "in": "query",
                "required": False,
                "schema": {"type": "string", "pattern": CURSOR_PATTERN},
            },
        ],
        "responses": {
            "200": {
                "description": "an event stream; each event's data is one line of JSON",
                "content": {"text/event-stream": {"schema": _event_schema()}},
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


def _event(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """One kind of event, as a client's SSE parser reads it: ``event``,
    ``data`` (JSON text, of schema ``data``) and ``id`` (the last id sent:
    live events carry none of their own)."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"const": name},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": data,
            },
            "id": {"type": "string", "pattern": CURSOR_PATTERN},
        },
    }


def _event_schema() -> dict[str, Any]:
    """Each event of a run's stream (OpenAPI 3.1: ``schema`` of an event stream
    describes one event)."""
    text = {"type": "string"}
    status = {
        "type": "object",
        "required": ["run_id", "status", "waiting_for", "wake_at"],
        "properties": {
            "run_id": text,
            "status": {"enum": list(STATUSES)},
            "waiting_for": {"type": ["string", "null"]},
            "wake_at": {"type": ["number", "null"]},
        },
    }
    pruned = {
        "type": "object",
        "required": ["run_id", "status"],
        "properties": {"run_id": text, "status": {"const": "pruned"}},
    }
    return {
        "oneOf": [
            _event("status", status),
            _event("step", {"$ref": _REF.format(model="Step")}),
            _event("end", {"anyOf": [{"$ref": _REF.format(model="Run")}, pruned]}),
            _event(
                "delta",
                {
                    "type": "object",
                    "required": ["key", "text"],
                    "properties": {"key": text, "text": text},
                },
            ),
            _event(
                "emit",
                {"type": "object", "required": ["key", "value"], "properties": {"key": text}},
            ),
            _event(
                "call",
                {
                    "type": "object",
                    "required": ["key", "name"],
                    "properties": {"key": text, "name": text},
                },
            ),
        ]
    }


def _camel(name: str) -> str:
    parts = "".join(c if c.isalnum() else " " for c in name).split()
    return "".join(p[:1].upper() + p[1:] for p in parts) or "Policy"


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
