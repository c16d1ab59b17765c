"""The API's endpoints: start, read, list, stream, signal and cancel runs.

Every handler reads the path it was routed on percent-encoded (see
:class:`~.security.Guard`) and decodes its own segments. A policy is looked
up by name among those the server was given, never imported. A start is
validated in full (the body's shape, then the policy's inputs, then the run
id) before anything is written, so a bad request leaves no trace in the
store, and a 422 names every field at fault.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from pydantic import ValidationError
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..conversations import Conversation
from ..core import codec
from ..core.errors import (
    ApprovalError,
    InputMismatchError,
    RunNotFound,
    SerializationError,
    StoreError,
)
from ..core.ledger import TERMINAL, check_run_id
from ..core.policy import Policy
from ..core.tags import MAX_TAGS, check_tags, parse_tag
from ..runner import Runner
from ..runner.routing import fleet_of
from ..stores.search import search_words
from ..stores.versions import MAX_VERSION, check_version
from .events import Cursor, run_events
from .models import (
    FieldProblem,
    PolicyInfo,
    Problem,
    StepPage,
    Version,
    VersionList,
    json_type_problems,
)
from .values import run_json, step_json

__all__ = [
    "DEFAULT_LIMIT",
    "ENQUEUE_WORDS",
    "LIST_CURSOR_PATTERN",
    "LIST_PARAMETERS",
    "MAX_LIMIT",
    "MAX_SIGNAL_NAME",
    "MAX_STREAMS",
    "MAX_VERSION",
    "NUMBER_PATTERN",
    "STATUSES",
    "STEP_PARAMETERS",
    "STREAM_RETRY",
    "Api",
    "CountedStream",
    "problem",
    "read_body",
    "take_stream",
]

STATUSES = ("pending", "running", "suspended", "succeeded", "failed", "cancelled")
#: The query parameters of ``GET /runs``, as the OpenAPI document lists them.
LIST_PARAMETERS = (
    "status",
    "policy",
    "queue",
    "id_contains",
    "created_after",
    "created_before",
    "tag",
    "text",
    "limit",
    "cursor",
)
#: The query parameters of ``GET /runs/{run_id}/steps``.
STEP_PARAMETERS = ("limit", "cursor")
#: Most runs on one page of ``GET /runs``, and most steps on one page of
#: ``GET /runs/{run_id}/steps``.
MAX_LIMIT = 500
#: Runs or steps on a page when ``limit`` is not given.
DEFAULT_LIMIT = 50
#: A JSON number and a JSON integer, as a query value may spell them (the
#: document's ``number`` and ``integer``).
NUMBER_PATTERN = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
_NUMBER = re.compile(NUMBER_PATTERN.removesuffix("$"))
_INTEGER = re.compile(r"-?[0-9]{1,18}")  # longer: out of range anyway
#: A page's cursor (``next``): a time as ``repr`` writes it (finite,
#: exponent bounded), ``_``, a name in base64url: for ``GET /runs`` the last
#: run's creation time and id, for ``GET /runs/{run_id}/steps`` the last
#: step's finish time and key.
LIST_CURSOR_PATTERN = (
    r"^-?[0-9]{1,17}(\.[0-9]{1,17})?(e[-+][0-9]{1,2})?"
    r"_([A-Za-z0-9_-]{4})*([A-Za-z0-9_-]{2}==|[A-Za-z0-9_-]{3}=)?$"
)
_LIST_CURSOR = re.compile(LIST_CURSOR_PATTERN.removesuffix("$"))
_BEFORE_ALL = (-math.inf, "")
#: A signal's name: 1 to 200 printable characters.
MAX_SIGNAL_NAME = 200
ENQUEUE_WORDS = frozenset({"run_id", "queue", "priority", "delay", "tags"})
#: Most event streams one API process serves at once (``max_streams=``):
#: each holds a connection and reads the store every ``poll`` seconds.
MAX_STREAMS = 100
#: Seconds a client refused a stream is told to wait (``Retry-After``).
STREAM_RETRY = 2


@dataclass
class Api:
    """What the handlers share: the runner, the policies by name, settings."""

    runner: Runner
    policies: dict[str, Policy[Any, Any]]
    execute: bool
    poll: float
    max_body: int
    openapi: dict[str, Any] = field(default_factory=dict)
    max_streams: int = MAX_STREAMS
    #: Event streams being served now (one event loop: no lock needed, as
    #: long as the check and the count are one step, with no await between).
    streams: int = 0
    _schemas: dict[str, dict[str, Any]] = field(default_factory=dict)

    def inputs_schema(self, pol: Policy[Any, Any]) -> dict[str, Any]:
        """The JSON schema of ``pol``'s inputs (``$defs`` inside), as the
        document gives it; an empty schema if pydantic cannot describe them."""
        schema = self._schemas.get(pol.name)
        if schema is None:
            try:
                schema = pol.signature.model.model_json_schema(mode="validation")
            except Exception:  # a hint pydantic cannot describe: pydantic alone checks
                schema = {}
            self._schemas[pol.name] = schema
        return schema


def _api(request: Request) -> Api:
    api: Api = request.app.state.api
    return api


def problem(
    status: int,
    error: str,
    fields: list[FieldProblem] | None = None,
    *,
    code: str | None = None,
) -> JSONResponse:
    """An error response: ``{"error": ..., "fields": [...], "code": ...}``,
    ``code`` the ``error_code`` of the Stalwart error behind it, if any."""
    body = Problem(error=error, fields=fields or [], code=code).model_dump(mode="json")
    return JSONResponse(body, status)


def _fields(exc: ValidationError, prefix: str = "") -> list[FieldProblem]:
    out = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err["loc"])
        where = f"{prefix}.{where}" if prefix and where else (prefix or where or "(body)")
        message = "unexpected field" if err["type"] == "extra_forbidden" else err["msg"]
        out.append(FieldProblem(field=where, message=message))
    return out


async def read_body(request: Request, limit: int) -> tuple[bool, Any]:
    """The request's JSON body (``(False, None)`` when empty); ValueError if
    it is not JSON or larger than ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise OverflowError(f"the body is larger than {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return False, None
    try:
        return True, json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the body is not JSON: {str(exc)[:200]}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _run_id(request: Request) -> str:
    return unquote(request.path_params["run_id"])


# -- policies -------------------------------------------------------------
async def list_policies(request: Request) -> Response:
    api = _api(request)
    out = []
    for pol in sorted(api.policies.values(), key=lambda p: p.name):
        try:
            schema = pol.parameters
        except Exception as exc:  # a hint pydantic cannot describe
            schema = {"type": "object", "description": f"no JSON schema: {type(exc).__name__}"}
        info = PolicyInfo(name=pol.name, description=pol.description, inputs=schema)
        out.append(info.model_dump(mode="json"))
    return JSONResponse(out)


async def start_run(request: Request) -> Response:
    """Validate everything, then enqueue: 201 (created) or 200 (that run id exists)."""
    from .models import StartRun

    api = _api(request)
    name = unquote(request.path_params["name"])
    pol = api.policies.get(name)
    if pol is None:
        shown = ", ".join(sorted(api.policies)[:20])
        return problem(404, f"no policy {name[:200]!r} here (this API starts: {shown})")
    try:
        present, body = await read_body(request, api.max_body)
    except OverflowError as exc:
        return problem(413, str(exc))
    except ValueError as exc:
        return problem(422, str(exc), [FieldProblem(field="(body)", message=str(exc))])
    try:
        start = StartRun.model_validate(body if present else {})
    except ValidationError as exc:
        fields = _fields(exc)
        return problem(422, f"invalid start of {pol.name!r}: {_summary(fields)}", fields)
    # The JSON types first, as the document names them: pydantic's lax mode
    # would read "2" and true as 2 and 1.
    schema = api.inputs_schema(pol)
    shape = [
        FieldProblem(field=_join("inputs", where), message=message)
        for where, message in json_type_problems(start.inputs, schema, schema)
    ]
    try:
        checked = pol.signature.model.model_validate(start.inputs)
    except ValidationError as exc:
        named = {f.field for f in shape}
        shape += [f for f in _fields(exc, "inputs") if f.field not in named]
    if shape:
        return problem(422, f"invalid inputs for {pol.name!r}: {_summary(shape)}", shape)
    run_id = start.run_id
    if run_id is not None:
        try:
            check_run_id(run_id)
        except (ValueError, TypeError) as exc:
            fields = [FieldProblem(field="run_id", message=str(exc))]
            return problem(422, f"invalid run_id: {exc}", fields)
    tags = None
    if start.tags is not None:
        try:
            tags = check_tags(start.tags) or None
        except (ValueError, TypeError) as exc:
            fields = [FieldProblem(field="tags", message=str(exc))]
            return problem(422, f"invalid tags: {exc}", fields)
    args, kwargs = _arguments(pol, checked)
    runner = api.runner
    try:
        handle = await runner.enqueue(
            pol,
            *args,
            run_id=run_id,
            queue=start.queue,
            priority=start.priority,
            delay=start.delay,
            tags=tags,
            **kwargs,
        )
    except InputMismatchError as exc:
        fields = [FieldProblem(field="run_id", message=str(exc))]
        return problem(409, str(exc), fields, code=exc.error_code)
    except SerializationError as exc:
        fields = _unrecordable(pol, checked, exc)
        message = f"invalid inputs for {pol.name!r}: {_summary(fields)}"
        return problem(422, message, fields, code=exc.error_code)
    rec = await runner.get_run(handle.run_id)
    location = f"/runs/{quote(rec.id, safe='')}"
    return JSONResponse(
        run_json(rec, pol).model_dump(mode="json"),
        201 if handle.created else 200,  # the store's answer: one of two racing starts
        headers={"Location": location},
    )


def _unrecordable(
    pol: Policy[Any, Any], checked: Any, exc: SerializationError
) -> list[FieldProblem]:
    """The inputs the codec refused to record (text UTF-8 cannot encode, a
    lone surrogate), each named by its field; looked for only once a start
    was refused, so a good start pays nothing for it."""
    out = []
    for p in pol.signature.params:
        try:
            codec.dumps(getattr(checked, p.name), f"inputs.{p.name}")
        except SerializationError as bad:
            where = f"inputs.{p.name}"
            message = str(bad).removeprefix(where).removeprefix(": ")
            out.append(FieldProblem(field=where, message=message))
    return out or [FieldProblem(field="inputs", message=str(exc))]


def _join(prefix: str, where: str) -> str:
    return f"{prefix}.{where}" if where else prefix


def _summary(fields: list[FieldProblem]) -> str:
    return "; ".join(f"{f.field}: {f.message}" for f in fields)


def _arguments(pol: Policy[Any, Any], checked: Any) -> tuple[list[Any], dict[str, Any]]:
    """The validated inputs as a call: positional where the parameter allows
    it (a parameter may be named like one of enqueue's own words, ``queue``),
    by keyword otherwise. Every parameter is passed, defaults included, so
    two starts of one run id with the same request are the same call."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in pol.signature.params:
        value = getattr(checked, p.name)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and not kwargs:
            args.append(value)
        else:
            kwargs[p.name] = value
    return args, kwargs  # keyword-only names never clash: create_app checked


# -- runs -----------------------------------------------------------------
async def get_run(request: Request) -> Response:
    api = _api(request)
    rec = await api.runner.get_run(_run_id(request))
    fleet = await fleet_of(api.runner.store)
    why = None if fleet is None else fleet.stranded(rec)
    return JSONResponse(run_json(rec, api.policies.get(rec.policy), why).model_dump(mode="json"))


async def get_steps(request: Request) -> Response:
    """A page of the run's steps in the order they finished, oldest first:
    the first ``limit``, or the first ``limit`` after the ``cursor`` a
    previous page gave as ``next``. A page reads its own records only
    (:meth:`~stalwart.runner.Runner.step_page`), whatever the run's length:
    a model call's record holds the conversation so far, so reading every
    step of a long conversation costs quadratic bytes."""
    api = _api(request)
    q = request.query_params
    problems = _empty(q, STEP_PARAMETERS)
    limit, position = _paging(q, problems)
    if problems:
        return problem(422, f"invalid page of steps: {_summary(problems)}", problems)
    # No cursor: the first page, after a position before every step.
    start = _BEFORE_ALL if position is None else position
    page = await api.runner.step_page(_run_id(request), limit, after=start)
    body = StepPage(
        steps=[step_json(s) for s in page.steps],
        step_count=page.count,
        earlier=page.earlier,
        later=page.later,
        next=_encode_cursor(*page.last) if page.later and page.last is not None else None,
    )
    return JSONResponse(body.model_dump(mode="json"))


async def list_runs(request: Request) -> Response:
    """Runs newest first; ``cursor`` pages by ``(created_at, id)`` (keyset)."""
    api = _api(request)
    q = request.query_params
    problems = _empty(q, LIST_PARAMETERS)
    filters: dict[str, Any] = {}
    status = q.get("status") or None
    if status is not None and status not in STATUSES:
        problems.append(FieldProblem(field="status", message=f"one of {', '.join(STATUSES)}"))
    for word in ("policy", "queue", "id_contains"):
        if q.get(word):
            filters[word] = q[word]
    for word in ("created_after", "created_before"):
        if q.get(word):
            try:
                filters[word] = _seconds(q[word])
            except ValueError:
                message = "seconds since the epoch: a finite decimal number"
                problems.append(FieldProblem(field=word, message=message))
    tags: dict[str, str] = {}
    clash = False  # one key asked with two values: no run has both
    given = q.getlist("tag")
    if len(given) > MAX_TAGS:
        problems.append(FieldProblem(field="tag", message=f"at most {MAX_TAGS} tags"))
    for text in given[:MAX_TAGS]:
        try:
            key, value = parse_tag(text, ":", "tag")
        except (ValueError, TypeError) as exc:
            problems.append(FieldProblem(field="tag", message=str(exc)))
            continue
        clash = clash or tags.get(key, value) != value
        tags[key] = value
    if tags:
        filters["tags"] = tags
    if q.get("text"):
        try:
            if not api.runner.store.text_search:
                raise ValueError("this store is encrypted: text search cannot read sealed values")
            search_words(q["text"])
            filters["text"] = q["text"]
        except ValueError as exc:
            problems.append(FieldProblem(field="text", message=str(exc)))
    limit, position = _paging(q, problems)
    if position is not None:
        filters["before"] = position
    if problems:
        return problem(422, f"invalid run listing: {_summary(problems)}", problems)
    rows = [] if clash else await api.runner.list_runs(status, limit + 1, **filters)
    page, more = rows[:limit], len(rows) > limit
    fleet = await fleet_of(api.runner.store) if page else None
    body = {
        "runs": [
            run_json(
                r, api.policies.get(r.policy), None if fleet is None else fleet.stranded(r)
            ).model_dump(mode="json")
            for r in page
        ],
        "next": _encode_cursor(page[-1].created_at, page[-1].id) if more and page else None,
    }
    return JSONResponse(body)


def _empty(q: QueryParams, words: tuple[str, ...]) -> list[FieldProblem]:
    """A parameter given empty (``?limit=``) is a mistake, not "any": refused,
    as the document's minLength (or type) says."""
    message = "given empty: leave it out, or give a value"
    return [FieldProblem(field=w, message=message) for w in words if w in q and not q[w]]


def _paging(q: QueryParams, problems: list[FieldProblem]) -> tuple[int, tuple[float, str] | None]:
    """The page's ``limit`` (:data:`DEFAULT_LIMIT` when not given) and the
    position its ``cursor`` holds (None: the first page); a bad one is added
    to ``problems``, named."""
    limit = DEFAULT_LIMIT
    if q.get("limit"):
        text = q["limit"]
        if _INTEGER.fullmatch(text) is None or not 1 <= int(text) <= MAX_LIMIT:
            message = f"an integer from 1 to {MAX_LIMIT}"
            problems.append(FieldProblem(field="limit", message=message))
        else:
            limit = int(text)
    position = None
    if q.get("cursor"):
        try:
            position = _decode_cursor(q["cursor"])
        except ValueError:
            problems.append(
                FieldProblem(field="cursor", message="not a cursor this API gave (next)")
            )
    return limit, position


def _encode_cursor(at: float, name: str) -> str:
    """``time_name``: the page's last run's creation time and id, or its
    last step's finish time and key, the name in base64url."""
    key = base64.urlsafe_b64encode(name.encode("utf-8", "surrogatepass")).decode()
    return f"{at!r}_{key}"


def _decode_cursor(text: str) -> tuple[float, str]:
    """The ``(time, name)`` a cursor holds; ValueError unless it has the
    form this API writes (:data:`LIST_CURSOR_PATTERN`, the document's): a
    finite time (not NaN, not infinity: a position no run or step has). Any
    text of that form is a position, whoever wrote it (a page then starts
    there); a name that is not UTF-8, or holds NUL (no store keeps one), is
    read with replacement characters."""
    if _LIST_CURSOR.fullmatch(text) is None:
        raise ValueError("not a cursor this API gave")
    when, key = text.split("_", 1)
    name = base64.urlsafe_b64decode(key).decode(errors="replace").replace("\x00", "\ufffd")
    return float(when), name


def _seconds(text: str) -> float:
    """A time given as a query value: a decimal number, finite (ValueError
    otherwise: Python's float also reads "inf", "nan", " 1 " and "1_0")."""
    if _NUMBER.fullmatch(text) is None:
        raise ValueError(text)
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


async def stream_events(request: Request) -> Response:
    """Server-Sent Events of the run, from ``Last-Event-ID`` on when given;
    503 with ``Retry-After`` while this process serves ``max_streams``."""
    api = _api(request)
    return await take_stream(api, lambda: _open_stream(api, request))


async def take_stream(api: Api, opening: Callable[[], Awaitable[Response]]) -> Response:
    """The response ``opening()`` gives, holding one of this process's
    ``max_streams`` places while it streams (:class:`CountedStream`); 503
    with ``Retry-After`` when none is free."""
    # The place is taken in the same step as the check, before any await: a
    # burst of opens (every client reconnecting after a restart) cannot all
    # pass the check while the first ones wait on the store.
    if api.streams >= api.max_streams:
        refused = problem(
            503,
            f"too many event streams: this API process serves at most {api.max_streams} at "
            f"once (max_streams); retry in {STREAM_RETRY} s",
        )
        refused.headers["Retry-After"] = str(STREAM_RETRY)
        return refused
    api.streams += 1
    handed_over = False
    try:
        response = await opening()
        if isinstance(response, CountedStream):
            handed_over = True  # the stream gives the place back when it ends
        return response
    finally:
        if not handed_over:
            api.streams -= 1


async def _open_stream(api: Api, request: Request) -> Response:
    """The stream of the run the request names, or why not (404, 400)."""
    # Either may be given (the header wins); each given is checked, and
    # given empty is no id this API sent either.
    cursors: list[Cursor] = []
    for where, given in (
        ("Last-Event-ID", request.headers.get("last-event-id")),
        ("last_event_id", request.query_params.get("last_event_id")),
    ):
        if given is not None:
            try:
                cursors.append(Cursor.parse(given))
            except ValueError as exc:
                return problem(400, str(exc), [FieldProblem(field=where, message=str(exc))])
    after = cursors[0] if cursors else Cursor()
    rec = await api.runner.get_run(_run_id(request))
    frames = run_events(
        api.runner,
        rec,
        after,
        poll=api.poll,
        live=api.execute,
        find_policy=api.policies.get,
    )
    return CountedStream(
        frames,
        release=api,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


class CountedStream(StreamingResponse):
    """A stream that gives its place back to ``release.streams`` when it
    ends, however it ends (the run's end, the client gone, an error)."""

    def __init__(self, content: Any, *, release: Api, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._release: Api | None = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self._release is not None:
                self._release.streams -= 1
                self._release = None


async def send_signal(request: Request) -> Response:
    """Queue the body (any JSON, or null) for the run's ``wait_for(name)``."""
    api = _api(request)
    run_id = _run_id(request)
    name = unquote(request.path_params["name"])
    if not name or len(name) > MAX_SIGNAL_NAME or not name.isprintable():
        message = f"a signal name is 1 to {MAX_SIGNAL_NAME} printable characters"
        return problem(422, message, [FieldProblem(field="name", message=message)])
    try:
        _, payload = await read_body(request, api.max_body)
    except OverflowError as exc:
        return problem(413, str(exc))
    except ValueError as exc:
        return problem(422, str(exc), [FieldProblem(field="(body)", message=str(exc))])
    rec = await api.runner.get_run(run_id)
    if rec.status in TERMINAL:
        return problem(409, f"run {run_id!r} has finished ({rec.status}); it takes no signals")
    try:
        codec.dumps(payload, f"signal {name!r}")
        await api.runner.signal(run_id, name, payload)
    except SerializationError as exc:
        fields = [FieldProblem(field="(body)", message=str(exc))]
        return problem(422, str(exc), fields, code=exc.error_code)
    except ApprovalError as exc:  # a tool approval's decision that does not fit: not queued
        fields = [FieldProblem(field=f"(body){exc.field}", message=str(exc))]
        return problem(422, str(exc), fields, code=exc.error_code)
    except StoreError:
        rec = await api.runner.get_run(run_id)
        if rec.status in TERMINAL:
            return problem(409, f"run {run_id!r} has finished ({rec.status}); it takes no signals")
        raise
    rec = await api.runner.get_run(run_id)
    return JSONResponse(run_json(rec, api.policies.get(rec.policy)).model_dump(mode="json"), 202)


async def cancel_run(request: Request) -> Response:
    """Ask for the run to stop: at its next await, within a heartbeat wherever it runs."""
    api = _api(request)
    run_id = _run_id(request)
    rec = await api.runner.get_run(run_id)
    if rec.status in TERMINAL:
        return problem(409, f"run {run_id!r} has finished ({rec.status})")
    await api.runner.cancel(run_id)
    rec = await api.runner.get_run(run_id)
    return JSONResponse(run_json(rec, api.policies.get(rec.policy)).model_dump(mode="json"), 202)


# -- versions ---------------------------------------------------------------


async def list_versions(request: Request) -> Response:
    """The application versions, latest and retired, with their live workers."""
    return JSONResponse(await _versions(_api(request)))


async def _versions(api: Api) -> dict[str, Any]:
    fleet = await fleet_of(api.runner.store)
    found = [] if fleet is None else fleet.versions
    live = [] if fleet is None else fleet.live
    body = VersionList(
        versions=[
            Version(
                version=v.version,
                latest=v.latest,
                retired=v.retired,
                retired_at=v.retired_at,
                first_seen=v.first_seen,
                live_workers=[w.owner for w in live if w.version == v.version],
            )
            for v in found
        ]
    )
    return body.model_dump(mode="json")


def _version(request: Request) -> str | FieldProblem:
    text = unquote(request.path_params["version"])
    try:
        return check_version(text, "version")
    except ValueError:
        return FieldProblem(
            field="version",
            message=f"1 to {MAX_VERSION} printable characters without spaces",
        )


async def set_latest_version(request: Request) -> Response:
    """Send new runs to this version's workers."""
    api = _api(request)
    version = _version(request)
    if isinstance(version, FieldProblem):
        return problem(422, f"invalid version: {version.message}", [version])
    await api.runner.store.set_latest(version)
    return JSONResponse(await _versions(api))


async def retire_version(request: Request) -> Response:
    """Retire this version: its workers take no more runs."""
    api = _api(request)
    version = _version(request)
    if isinstance(version, FieldProblem):
        return problem(422, f"invalid version: {version.message}", [version])
    await api.runner.store.retire_version(version)
    return JSONResponse(await _versions(api))


async def send_message(request: Request) -> Response:
    """A turn of the conversation ``conversation_id`` with ``agent`` (the
    conversation started if new): 202 with the turn's run id, whose result is
    the reply (``GET /runs/{turn_id}``, or its ``end`` event). Without
    ``--execute`` the conversation's run and the turn are enqueued (queue ``default``) for a
    worker serving ``conversation_policies(agent)``."""
    api = _api(request)
    conversation_id = unquote(request.path_params["conversation_id"])
    try:
        present, body = await read_body(request, api.max_body)
    except OverflowError as exc:
        return problem(413, str(exc))
    except ValueError as exc:
        return problem(422, str(exc), [FieldProblem(field="(body)", message=str(exc))])
    problems: list[FieldProblem] = []
    if not present or not isinstance(body, dict):
        body = {}
        problems.append(FieldProblem(field="(body)", message="an object: agent, message"))
    agent_name = body.get("agent")
    agent = api.policies.get(agent_name) if isinstance(agent_name, str) else None
    if agent is None or "question" not in {p.name for p in agent.signature.params}:
        problems.append(
            FieldProblem(field="agent", message="the name of a served policy taking a question")
        )
    if "message" not in body:
        problems.append(FieldProblem(field="message", message="required"))
    message_id = body.get("message_id")
    try:
        check_run_id(conversation_id)
        if message_id is not None:
            check_run_id(message_id)
    except (ValueError, TypeError) as exc:
        named = message_id is None or "message_id" in str(exc)
        where = "conversation_id" if named else "message_id"
        problems.append(FieldProblem(field=where, message=str(exc)))
    if problems:
        return problem(422, f"invalid message: {_summary(problems)}", problems)
    assert agent is not None
    try:
        queue = None if api.execute else "default"
        conversation = Conversation(api.runner, agent, conversation_id, queue=queue)
        handle = await conversation.put(body["message"], message_id=message_id)
    except InputMismatchError as exc:
        fields = [FieldProblem(field="conversation_id", message=str(exc))]
        return problem(409, str(exc), fields, code=exc.error_code)
    except SerializationError as exc:
        fields = [FieldProblem(field="message", message=str(exc))]
        return problem(422, str(exc), fields, code=exc.error_code)
    turn = handle.run_id
    return JSONResponse(
        {"conversation_id": conversation_id, "turn_id": turn},
        202,
        headers={"Location": f"/runs/{quote(turn, safe='')}"},
    )


async def openapi(request: Request) -> Response:
    return JSONResponse(_api(request).openapi)


# -- errors ---------------------------------------------------------------
async def not_found(request: Request, exc: Exception) -> Response:
    return problem(404, str(exc), code=RunNotFound.error_code)


async def store_error(request: Request, exc: Exception) -> Response:
    from ..core.errors import CorruptedRecord
    from ..core.redact import redact

    status = 500 if isinstance(exc, CorruptedRecord) else 503
    code = exc.error_code if isinstance(exc, StoreError) else None
    return problem(status, redact(f"{type(exc).__name__}: {exc}"), code=code)


ERROR_HANDLERS: dict[Any, Any] = {RunNotFound: not_found, StoreError: store_error}
