"""Policies served as MCP tools, over stdio or streamable HTTP.

Each exposed policy is a tool whose input schema is the policy's own (type
hints and docstring, parameter descriptions kept) and whose arguments go
through the policy's own validation. A call runs the policy as a run of a
:class:`~stalwart.Runner`; with a durable store each call is a durable run:

- Its run id is an idempotency key derived from the request: the client's
  key when it sends one in ``_meta`` (:data:`IDEMPOTENCY_KEY`), else a hash of
  the tool's name and its arguments (canonical JSON). The same request again,
  whether a retry after a timeout or after the server crashed, starts the
  same run id: the runner answers from the finished run, or resumes the run
  the dead server left where its ledger stops.
- ``ctx.emit(value)`` in the policy reaches the client as a progress
  notification (when the client asked for progress): a number is the
  progress, a ``{"progress", "total", "message"}`` dict is read as such, and
  anything else is the message of the next step of a counter.

- A run that waits for a signal (``ctx.wait_for``, ``ctx.ask``) does not
  keep the call open: the call is answered with what the run waits for (its
  run id, the signal's name, the prompt and details), how to send the
  signal, and that calling the tool again with the same request gives the
  run's outcome once it has one.

Errors (invalid arguments, an unknown tool, the policy's own exception, a
cancelled run) come back as ``isError`` results whose text names the cause;
arguments go through the policy's own validation (the same as every other
way a policy is called), and a call whose ``name`` is not a string or whose
``arguments`` are not an object is answered with an error naming that field.

Resources (:class:`Resource`, given to ``serve`` beside the tools) are
policies without arguments: reading one runs its policy as a fresh run (a
resource is read for its current content, so no idempotency key); a failed
read is a JSON-RPC error naming the resource.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import types as pytypes
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError

import stalwart as sw
from stalwart.core.ledger import CHILDREN_WAIT, RunRecord

from .content import result_of
from .questions import ASK_WINDOW, Question, answer_given, ask_client, latest_question

__all__ = [
    "IDEMPOTENCY_KEY",
    "WAITING",
    "Resource",
    "build_server",
    "exposed",
    "parse_http",
    "request_run_id",
    "serve",
    "tool",
]

IDEMPOTENCY_KEY = "stalwart/idempotency-key"
"""The ``_meta`` key under which a client may name its request for retries."""

WAITING = "stalwart/waiting"
"""The ``_meta`` key of a result that says the run waits for a signal:
``{"run_id", "signal", "prompt", "about"}``."""

_MARK = "mcp_tool_name"
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


def tool(target: Any = None, /, *, name: str | None = None) -> Any:
    """Mark a policy as exposed by ``serve`` (as ``name``, default its own).

    ``@mcp.tool`` or ``@mcp.tool(name="search")``, above ``@sw.policy`` (or
    alone: a plain function becomes a policy). Only marked policies of a module
    are served; a list or dict given to ``serve`` says itself what is served.
    """

    def mark(fn: Any) -> sw.Policy[Any, Any]:
        pol = fn if isinstance(fn, sw.Policy) else sw.policy(fn)
        tool_name = name or pol.name
        if not _TOOL_NAME.match(tool_name):
            raise ValueError(f"{tool_name!r} is not a valid MCP tool name")
        pol.__dict__[_MARK] = tool_name
        return pol

    return mark if target is None else mark(target)


def exposed(app: Any, *, required: bool = True) -> dict[str, sw.Policy[Any, Any]]:
    """The tools ``app`` serves, by tool name.

    ``app`` is a module (its policies marked with :func:`tool`), a dict of
    tool name to policy, a list of policies (each under its mark or its
    name), or one policy. A module without a marked policy is a ValueError,
    or no tools with ``required=False`` (its tools come from elsewhere too,
    PocketJoe's marks); any other mistake is a ValueError whatever
    ``required`` says, naming the module and the tool.
    """
    out: dict[str, sw.Policy[Any, Any]] = {}
    where = ""
    if isinstance(app, pytypes.ModuleType):
        where = f"module {app.__name__}: "
        found = [v for v in vars(app).values() if isinstance(v, sw.Policy) and _MARK in v.__dict__]
        if not found:
            if not required:
                return out
            raise ValueError(
                f"module {app.__name__} has no policy marked with @stalwart.mcp.tool; mark the "
                "ones to serve, or pass a list of policies"
            )
        items: Iterable[tuple[str, Any]] = ((p.__dict__[_MARK], p) for p in found)
    elif isinstance(app, Mapping):
        items = app.items()
    elif isinstance(app, sw.Policy) or callable(app):
        items = [(_name_of(app), app)]
    else:
        items = ((_name_of(p), p) for p in app)
    for tool_name, target in items:
        pol = target if isinstance(target, sw.Policy) else sw.policy(target)
        if not isinstance(tool_name, str) or not _TOOL_NAME.match(tool_name):
            raise ValueError(f"{where}{tool_name!r} is not a valid MCP tool name")
        if tool_name in out and out[tool_name] is not pol:
            raise ValueError(
                f"{where}two policies would be served as the tool {tool_name!r} "
                f"({out[tool_name].name!r} and {pol.name!r})"
            )
        out[tool_name] = pol
    if not out:
        raise ValueError("no policy to serve")
    return out


def _name_of(target: Any) -> str:
    pol = target if isinstance(target, sw.Policy) else sw.policy(target)
    return str(pol.__dict__.get(_MARK, pol.name))


def request_run_id(tool_name: str, arguments: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """The run id of a tool call: the client's key, or a hash of the request."""
    key = meta.get(IDEMPOTENCY_KEY)
    if key is not None:
        if not isinstance(key, str) or not key:
            raise ValueError(f"_meta[{IDEMPOTENCY_KEY!r}] must be a non-empty string")
        # Hashed with the tool's name: two tools' keys can never name one run
        # (``a`` + ``b-key-c`` vs ``a-key-b`` + ``c``), and no client key can
        # make a run id the engine refuses (control characters, length).
        digest = hashlib.sha256(f"{tool_name}\0{key}".encode()).hexdigest()[:32]
        return f"mcp-{tool_name}-key-{digest}"
    canonical = json.dumps(
        {"tool": tool_name, "arguments": arguments},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )  # fmt: skip
    return f"mcp-{tool_name}-{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"


@dataclass(frozen=True)
class Resource:
    """A resource served at ``uri``: reading it runs ``policy`` (which takes
    no arguments); a ``str`` it returns is text, ``bytes`` a blob, anything
    else JSON."""

    uri: str
    policy: sw.Policy[Any, Any]
    name: str | None = None
    description: str | None = None
    mime_type: str | None = None


def _contents(value: Any, res: Resource) -> types.TextResourceContents | types.BlobResourceContents:
    """What a resource's policy returned, as the contents of its read."""
    if isinstance(value, bytes):
        blob = base64.b64encode(value).decode("ascii")
        mime = res.mime_type or "application/octet-stream"
        return types.BlobResourceContents(uri=res.uri, mime_type=mime, blob=blob)
    if isinstance(value, str):
        return types.TextResourceContents(
            uri=res.uri, mime_type=res.mime_type or "text/plain", text=value
        )
    text = sw.Message.result("mcp", value, name=res.name or res.policy.name).text
    mime = res.mime_type or "application/json"
    return types.TextResourceContents(uri=res.uri, mime_type=mime, text=text)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _progress(value: Any, n: int) -> tuple[float, float | None, str | None]:
    """An emitted value as (progress, total, message); ``n`` counts emits."""
    if isinstance(value, bool):
        return float(n), None, str(value)
    if isinstance(value, int | float):
        return float(value), None, None
    if isinstance(value, Mapping) and isinstance(value.get("progress"), int | float):
        total = value.get("total")
        message = value.get("message")
        return (
            float(value["progress"]),
            float(total) if isinstance(total, int | float) else None,
            str(message) if message is not None else None,
        )
    if isinstance(value, str):
        return float(n), None, value
    return float(n), None, sw.Message.result("emit", value, name="emit").text


def _failure(exc: BaseException) -> str:
    """What the client reads for a failed run: the policy's own error, which
    a handle's ``result()`` raises as itself (a :class:`~stalwart.StepError`
    stands in for a type the program did not declare)."""
    if isinstance(exc, sw.StepError):
        return f"{exc.error_type}: {exc.error_message}"
    return f"{type(exc).__name__}: {exc}"


def build_server(
    tools: Mapping[str, sw.Policy[Any, Any]],
    runner: sw.Runner,
    *,
    name: str = "stalwart",
    resources: Iterable[Resource] = (),
) -> Server[Any]:
    """The SDK's low-level server for ``tools`` (and ``resources``), each
    call or read a run of ``runner``."""
    served = {r.uri: r for r in resources}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=n, description=p.description or None, input_schema=p.parameters)
                for n, p in tools.items()
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        pol = tools.get(params.name)
        if pol is None:
            return _error(f"unknown tool {params.name!r}; tools: {', '.join(sorted(tools))}")
        arguments = dict(params.arguments or {})
        try:
            kwargs = pol.validate(arguments)
            run_id = request_run_id(params.name, arguments, dict(params.meta or {}))
            handle = await runner.start(pol, run_id=run_id, **kwargs)
        except sw.InputMismatchError:
            # Not the stored run's inputs: another client's, never shown here.
            return _error(
                "InputMismatchError: this request's idempotency key was already used "
                "with other arguments"
            )
        except (sw.ArgumentError, sw.StalwartError, ValueError) as exc:
            return _error(f"{type(exc).__name__}: {exc}")
        try:
            declined = ""  # a question the user would not answer: not asked again
            if params.input_responses:  # sent again with the user's answer
                rec = await runner.get_run(run_id)
                question = await _question(runner, rec) if rec.status == "suspended" else None
                if await answer_given(runner, params, question):
                    handle = await runner.start(pol, run_id=run_id, **kwargs)
                elif question is not None:
                    declined = question.input_key
            for _ in range(MAX_QUESTIONS):
                waiting = await _until_settled(ctx, runner, handle)
                if waiting is None:
                    break
                question = await _question(runner, waiting)
                asked: types.InputRequiredResult | bool = False
                if question is not None and question.input_key != declined:
                    asked = await ask_client(ctx, runner, question)
                if isinstance(asked, types.InputRequiredResult):
                    return asked
                if not asked:
                    return _waiting(waiting, question, params.name)
                handle = await runner.start(pol, run_id=run_id, **kwargs)
            else:
                return _error(f"the run {run_id!r} asked more than {MAX_QUESTIONS} questions")
            value = await handle.result()
        except Exception as exc:
            return _error(_failure(exc))
        return result_of(value, params.name)

    def input_schema(tool_name: str) -> dict[str, Any] | None:
        pol = tools.get(tool_name)
        return None if pol is None else pol.parameters

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=r.uri,
                    name=r.name or r.policy.name,
                    description=r.description or r.policy.description or None,
                    mime_type=r.mime_type,
                )
                for r in served.values()
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        res = served.get(str(params.uri))
        if res is None:
            known = ", ".join(sorted(served))
            raise MCPError(
                types.INVALID_PARAMS, f"unknown resource {params.uri!r}; served: {known}"
            )
        try:
            value = await runner.run(res.policy)
        except Exception as exc:
            raise MCPError(
                types.INTERNAL_ERROR, f"reading resource {res.uri!r} failed: {_failure(exc)}"
            ) from None
        return types.ReadResourceResult(contents=[_contents(value, res)])

    extra: dict[str, Any] = {}
    if served:  # listed only when there are some: the capability says so
        extra = {"on_list_resources": list_resources, "on_read_resource": read_resource}
    server: Server[Any] = Server(
        name,
        version=sw.__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=input_schema,
        **extra,
    )
    # Before the SDK's own check of the request, which answers a bad shape
    # with a bare "Invalid request parameters".
    server.middleware.append(_check_call_shape)
    return server


async def _check_call_shape(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """A ``tools/call`` whose name or arguments have the wrong JSON type is
    answered with an error result naming the field."""
    if ctx.method == "tools/call":
        problem = _shape_problem(ctx.params)
        if problem is not None:
            return _error(f"InvalidRequest: {problem}")
    return await call_next(ctx)


def _shape_problem(params: Any) -> str | None:
    if not isinstance(params, Mapping):
        return f"tools/call: params must be an object with the tool's name, not {_kind(params)}"
    name = params.get("name")
    if not isinstance(name, str):
        return f"tools/call: name must be the tool's name as a string, not {_kind(name)}"
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, Mapping):
        return (
            f"tools/call {name[:128]!r}: arguments must be an object of argument names "
            f"to values, not {_kind(arguments)}"
        )
    meta = params.get("_meta")
    if meta is not None and not isinstance(meta, Mapping):
        return f"tools/call {name[:128]!r}: _meta must be an object, not {_kind(meta)}"
    return None


def _kind(value: Any) -> str:
    """A JSON value's type, as JSON names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


async def _until_settled(
    ctx: ServerRequestContext[Any], runner: sw.Runner, handle: sw.RunHandle
) -> RunRecord | None:
    """Forward the run's progress until it ends (None), or until it is
    suspended waiting for a signal (its record): nothing more happens then
    until someone sends it, so the call is answered with that."""
    waiting: list[RunRecord] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            while True:
                rec = await runner.get_run(handle.run_id)
                if rec.status in ("succeeded", "failed", "cancelled"):
                    return
                if rec.status == "suspended" and _signal_of(rec) is not None:
                    waiting.append(rec)
                    tg.cancel_scope.cancel()
                    return
                await anyio.sleep(runner.poll_interval)

        async def progress() -> None:
            await _forward_progress(ctx, handle)  # until the run ends
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        tg.start_soon(progress)
    return waiting[0] if waiting else None


def _signal_of(rec: RunRecord) -> str | None:
    """The signal a suspended run waits for (not a timer, not its child runs)."""
    name = rec.waiting_for
    if not name or name.startswith(CHILDREN_WAIT):
        return None
    return name


#: How many questions one call asks its client before it answers with the wait.
MAX_QUESTIONS = 20


async def _question(runner: sw.Runner, rec: RunRecord) -> Question | None:
    """What a run suspended on a signal asks (None: it waits for no signal)."""
    signal = _signal_of(rec)
    if signal is None:
        return None
    # What it asks was recorded just before the wait: among its latest steps.
    steps = (await runner.step_page(rec.id, ASK_WINDOW)).steps
    return latest_question(rec.id, signal, steps)


def _waiting(rec: RunRecord, question: Question | None, tool_name: str) -> types.CallToolResult:
    """The answer to a call whose run waits for a signal."""
    signal = _signal_of(rec) or ""
    prompt = question.prompt if question is not None else None
    about = question.about if question is not None else None
    lines = [f"The run {rec.id!r} is waiting for the signal {signal!r}."]
    if prompt is not None:
        lines.append(f"It asks: {prompt}")
    if about is not None:
        lines.append("About: " + sw.Message.result("mcp", about, name=tool_name).text)
    lines.append(
        "It goes on when the signal is sent, with its answer as a JSON payload: "
        f"`stalwart signal {rec.id} {signal} '<json>'`, or POST "
        f"/runs/{rec.id}/signals/{signal} to `stalwart serve`, or runner.signal(...). "
        f"Then call {tool_name!r} again with the same arguments (or the same "
        f"{IDEMPOTENCY_KEY!r}) for the run's outcome."
    )
    meta = {"run_id": rec.id, "signal": signal, "prompt": prompt, "about": about}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="\n".join(lines))],
        _meta={WAITING: json.loads(json.dumps(meta, default=str))},
    )


async def _forward_progress(ctx: ServerRequestContext[Any], handle: sw.RunHandle) -> None:
    """Send what the run emits as progress notifications (none if not asked),
    until the run's events end with its finish."""
    n = 0
    async for event in handle.events():
        if isinstance(event, sw.Emitted):
            n += 1
            progress, total, message = _progress(event.value, n)
            await ctx.session.report_progress(progress, total, message)


def parse_http(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6) as a host and a port."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--http takes HOST:PORT, not {address!r}")
    return host.strip("[]"), int(port)


async def serve(
    app: Any,
    *,
    store: str | None = None,
    http: str | None = None,
    name: str = "stalwart",
    runner: sw.Runner | None = None,
    resources: Iterable[Resource] = (),
) -> None:
    """Serve the policies of ``app`` (see :func:`exposed`) as MCP tools, and
    ``resources`` as MCP resources (``app`` may then be empty).

    Over stdio by default; over streamable HTTP at ``http="HOST:PORT"``
    (endpoint ``/mcp``). With ``store`` (a store URL) each call is a durable
    run; pass a ``runner`` instead for other runner settings. Returns when
    stdin closes (stdio) or the process is told to stop (HTTP).
    """
    listed = list(resources)
    nothing = isinstance(app, Mapping | list | tuple) and not app
    tools = {} if listed and nothing else exposed(app)
    own = runner is None
    policies = [*tools.values(), *(r.policy for r in listed)]
    run = runner if runner is not None else sw.Runner(store, policies=policies)
    server = build_server(tools, run, name=name, resources=listed)
    try:
        if http is None:
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        else:
            import uvicorn

            host, port = parse_http(http)
            asgi = server.streamable_http_app(host=host)
            config = uvicorn.Config(asgi, host=host, port=port, log_level="warning")
            await uvicorn.Server(config).serve()
    finally:
        if own:
            await run.close()
