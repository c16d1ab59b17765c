"""MCP servers' tools as options a model can be offered.

``connect`` reaches a server over stdio (a command) or streamable HTTP (a URL)
and gives back a :class:`Toolbox`: a list of policies, one per tool, each with
the server's name, description and input schema. Offer it like any options
(``options=tools`` or ``options=[*tools, search]``); the runtime's allow-list,
validation (against the server's JSON schema) and error results apply to them
as to any policy.

Durability, in three rules:

- The tool listing is a recorded step (``mcp_list_tools``, its only argument
  the server's name: no command, URL or header reaches the ledger). A resumed
  run offers its model the tools it was offered the first time, so a server
  that changed its tool list does not make the run's recorded model calls
  diverge.
- Each tool call is a recorded step under the tool's name. A resumed run
  answers a finished call from the ledger and never sends it again; a run that
  replays to its end does not even start the server.
- A live call checks the tool against the server's live listing first: a tool
  the server removed, or whose input schema changed since the run listed it,
  fails that call only, with :class:`ToolChanged` showing both schemas.

One session per toolbox: opened on the first live need, shared by every call
(concurrent ones included), opened again after the server went away, closed
by :meth:`Toolbox.aclose` or the end of ``async with``. The session lives in a
task of its own, because the SDK's transports must be entered and left in one
task while the calls come from the runtime's tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
import jsonschema  # type: ignore[import-untyped]
import mcp_types as types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import stalwart as sw
from mcp import Client, StdioServerParameters

from .content import message_of, text_of
from .errors import ServerUnavailable, ToolChanged, ToolError

__all__ = ["McpTool", "Progress", "Toolbox", "connect"]

_log = logging.getLogger("stalwart.mcp")

# A server whose tools/list never ends cannot hang a run.
_MAX_PAGES = 100


@dataclass(frozen=True, slots=True)
class Progress:
    """A progress notification from the server during a tool call.

    Emitted with ``ctx.emit`` by the tool's step, so ``runner.stream(...)``
    and ``handle.events()`` show it as an :class:`~stalwart.Emitted` value.
    """

    tool: str
    progress: float
    total: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class _Endpoint:
    """How to reach a server. Never recorded: it may hold credentials."""

    name: str
    argv: tuple[str, ...] = ()
    url: str | None = None
    headers: Mapping[str, str] | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None

    def describe(self) -> str:
        """What an error message may say about the endpoint (no headers, no env)."""
        if self.url is not None:
            parts = urlsplit(self.url)
            port = f":{parts.port}" if parts.port else ""
            return f"{parts.scheme}://{parts.hostname or ''}{port}"
        return " ".join(self.argv[:2])


class McpTool(sw.Policy[..., sw.Message]):
    """One tool of an MCP server, as a policy a model can be offered.

    Its schema is the server's, and its arguments are validated against that
    schema (JSON Schema, every error listed) before the call is sent. Its
    result is a :class:`~stalwart.Message` (see :mod:`stalwart.mcp.content`);
    an ``isError`` result raises :class:`ToolError`, which the model reads
    as an error result.
    """

    def __init__(
        self, box: Toolbox, remote: str, name: str, description: str, schema: dict[str, Any]
    ) -> None:
        async def call(ctx: sw.Context, **arguments: Any) -> sw.Message:
            return await box.connection.call(ctx, self, arguments)

        call.__name__ = call.__qualname__ = name
        super().__init__(call, name=name, description=description)
        self.remote = remote
        self.schema = schema
        self.server = box.name

    @property
    def parameters(self) -> dict[str, Any]:
        """The server's input schema, as the model is shown it."""
        return json.loads(json.dumps(self.schema))  # type: ignore[no-any-return]

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check ``arguments`` against the server's schema; raise ArgumentError."""
        validator = self.__dict__.get("_validator")
        if validator is None:
            cls = jsonschema.validators.validator_for(self.schema)
            try:
                cls.check_schema(self.schema)
            except jsonschema.SchemaError as exc:
                raise sw.ArgumentError(
                    f"the input schema MCP server {self.server!r} gives for {self.remote!r} "
                    f"is not a valid JSON schema: {exc.message}"
                ) from None
            validator = self.__dict__["_validator"] = cls(self.schema)
        problems = []
        for err in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path)):
            where = ".".join(str(x) for x in err.path) or "(arguments)"
            problems.append(f"{where}: {err.message}")
        if problems:
            raise sw.ArgumentError(f"invalid arguments for {self.name!r}: " + "; ".join(problems))
        return dict(arguments)

    def with_settings(self, **changes: Any) -> sw.Policy[..., sw.Message]:
        raise TypeError(
            f"{self.name!r} is an MCP tool; pick its name with connect(prefix=...) and its "
            "timeout with connect(timeout=...)"
        )


class Toolbox(list[McpTool]):
    """The tools of one MCP server, as options; closes its session on exit.

    A list, so it is offered as it is (``options=tools``) or combined
    (``options=[*tools, other]``). ``tools["name"]`` finds a tool by name.
    """

    def __init__(self, connection: _Connection) -> None:
        super().__init__()
        self.connection = connection
        self.name = connection.endpoint.name

    def tool(self, name: str) -> McpTool:
        """The tool offered under ``name``."""
        for t in self:
            if t.name == name:
                return t
        raise KeyError(f"MCP server {self.name!r} offers no tool {name!r} here")

    async def aclose(self) -> None:
        """Close the session (and stop a stdio server); idempotent."""
        await self.connection.close()

    async def __aenter__(self) -> Toolbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Connection:
    """The live session with one server, opened on demand, again after a death."""

    def __init__(self, endpoint: _Endpoint, timeout: float) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._live: dict[str, types.Tool] = {}
        self._lock = asyncio.Lock()

    # -- the session -----------------------------------------------------------
    async def session(self) -> tuple[Client, dict[str, types.Tool]]:
        """The open session and the tools it lists, by name."""
        async with self._lock:
            if self._client is None or self._holder is None or self._holder.done():
                await self._drop()
                try:
                    async with asyncio.timeout(self.timeout):
                        self._client = await self._open()
                        self._live = {t.name: t for t in await self.listing()}
                except Exception as exc:
                    await self._drop()
                    raise ServerUnavailable(
                        f"MCP server {self.endpoint.name!r} ({self.endpoint.describe()}) "
                        f"could not be reached: {_describe(exc)}"
                    ) from None
            return self._client, self._live

    async def listing(self) -> list[types.Tool]:
        """Every tool the open session lists, page after page."""
        assert self._client is not None
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await self._client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def _open(self) -> Client:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(ready, self._stop))
        return await ready

    async def _hold(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """Own the session from enter to exit, in this one task."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                target: Any
                ep = self.endpoint
                if ep.url is not None:
                    http = httpx2.AsyncClient(
                        headers=dict(ep.headers or {}),
                        timeout=httpx2.Timeout(30.0, read=max(self.timeout, 30.0)),
                    )
                    await stack.enter_async_context(http)
                    target = streamable_http_client(ep.url, http_client=http)
                else:
                    target = StdioServerParameters(
                        command=ep.argv[0],
                        args=list(ep.argv[1:]),
                        env=dict(ep.env) if ep.env is not None else None,
                        cwd=ep.cwd,
                    )
                client = await stack.enter_async_context(
                    Client(target, read_timeout_seconds=self.timeout)
                )
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                error = exc if isinstance(exc, Exception) else ServerUnavailable(str(exc))
                ready.set_exception(error)
            elif not isinstance(exc, asyncio.CancelledError):
                _log.info("MCP server %r: session ended: %s", self.endpoint.name, _describe(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _drop(self) -> None:
        """Close the session, if any, and wait for its task to end."""
        holder, self._holder, self._client = self._holder, None, None
        if holder is None:
            return
        if self._stop is not None:
            self._stop.set()
        try:
            async with asyncio.timeout(10):
                await asyncio.shield(holder)
        except TimeoutError:
            holder.cancel()
            with contextlib.suppress(BaseException):
                await holder
        except BaseException:  # the session's own end; it was logged
            if holder.cancelled() and (task := asyncio.current_task()) and task.cancelling():
                raise

    async def close(self) -> None:
        async with self._lock:
            await self._drop()

    async def lost(self, client: Client) -> None:
        """Forget a session that failed under a call, so the next call reconnects."""
        async with self._lock:
            if self._client is client:
                await self._drop()

    # -- calls ---------------------------------------------------------------------
    async def call(self, ctx: sw.Context, tool: McpTool, arguments: dict[str, Any]) -> sw.Message:
        client, live = await self.session()
        listed = live.get(tool.remote)
        server = self.endpoint.name
        if listed is None:
            offered = ", ".join(sorted(live)) or "(none)"
            raise ToolChanged(
                f"MCP server {server!r} no longer offers the tool {tool.remote!r} this run "
                f"listed; it offers: {offered}"
            )
        if listed.input_schema != tool.schema:
            was, now = _json(tool.schema), _json(listed.input_schema)
            raise ToolChanged(
                f"MCP server {server!r} changed the input schema of {tool.remote!r} since this "
                f"run listed it: it was {was}; it is now {now}"
            )

        async def report(progress: float, total: float | None, message: str | None) -> None:
            ctx.emit(Progress(tool.name, progress, total, message))

        try:
            result = await client.call_tool(
                tool.remote, arguments, read_timeout_seconds=self.timeout,
                progress_callback=report,
            )  # fmt: skip
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                await self.lost(client)
                raise ServerUnavailable(
                    f"MCP server {server!r} went away during the call of {tool.remote!r}: "
                    f"{exc.message}"
                ) from None
            if exc.code == types.REQUEST_TIMEOUT:
                raise TimeoutError(
                    f"MCP server {server!r} did not answer the call of {tool.remote!r} "
                    f"within {self.timeout} s"
                ) from None
            raise ToolError(f"MCP server {server!r} refused the call: {exc.message}") from None
        except (TimeoutError, asyncio.CancelledError):
            raise
        except Exception as exc:
            await self.lost(client)
            raise ServerUnavailable(
                f"MCP server {server!r} went away during the call of {tool.remote!r}: "
                f"{_describe(exc)}"
            ) from None
        if result.is_error:
            raise ToolError(text_of(result))
        return message_of(result, tool.name)


def _describe(exc: BaseException) -> str:
    """One line for an error that may come wrapped in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or "(no message)"
    return f"{type(exc).__name__}: {text}"


def _json(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


class _Connect:
    """``await connect(...)`` or ``async with connect(...) as tools``."""

    def __init__(
        self,
        endpoint: _Endpoint,
        allow: Iterable[str] | None,
        prefix: str,
        timeout: float,
    ) -> None:
        self._endpoint = endpoint
        self._allow = None if allow is None else list(allow)
        self._prefix = prefix
        self._timeout = timeout
        self._box: Toolbox | None = None

    def __await__(self) -> Generator[Any, None, Toolbox]:
        return self._open().__await__()

    async def __aenter__(self) -> Toolbox:
        self._box = await self._open()
        return self._box

    async def __aexit__(self, *exc: object) -> None:
        if self._box is not None:
            await self._box.aclose()

    async def _open(self) -> Toolbox:
        connection = _Connection(self._endpoint, self._timeout)
        box = Toolbox(connection)
        try:
            listed = await _listing_policy(connection)(server=self._endpoint.name)
            by_name = {t["name"]: t for t in listed}
            names = list(by_name) if self._allow is None else self._allow
            missing = [n for n in names if n not in by_name]
            if missing:
                raise ValueError(
                    f"allow names tools MCP server {box.name!r} does not offer: "
                    f"{', '.join(missing)}; it offers: {', '.join(sorted(by_name)) or '(none)'}"
                )
            for n in names:
                t = by_name[n]
                box.append(
                    McpTool(box, n, self._prefix + n, t.get("description") or "", t["input_schema"])
                )
        except BaseException:
            await connection.close()
            raise
        return box


def _listing_policy(
    connection: _Connection,
) -> Callable[..., Awaitable[list[dict[str, Any]]]]:
    """The step that lists the server's tools: recorded inside a run, so a
    resumed run is offered what it was offered (and starts no server)."""

    async def mcp_list_tools(server: str) -> list[dict[str, Any]]:
        _, live = await connection.session()
        return [
            {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
            for t in live.values()
        ]

    return sw.policy(mcp_list_tools)


def connect(
    server: str | Sequence[str],
    *,
    name: str | None = None,
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    allow: Iterable[str] | None = None,
    prefix: str = "",
    timeout: float = 60.0,
) -> _Connect:
    """Reach an MCP server and get its tools as options.

    ``server`` is a URL (``http://`` or ``https://``: streamable HTTP, with
    ``headers`` such as ``Authorization``) or a command as a list
    (``["python", "server.py"]``: stdio, with ``env`` and ``cwd``; the SDK
    passes only a safe default environment unless ``env`` is given).
    ``name`` names the server in the ledger and in errors (default: the
    URL's host, or the command's last word); ``allow`` offers only the tools
    named; ``prefix`` is put before each tool's name (two servers with a
    ``search`` tool each); ``timeout`` bounds connecting and each call, in
    seconds.

    Use ``async with connect(...) as tools:`` (the session closes on exit) or
    ``tools = await connect(...)`` and ``await tools.aclose()``.
    """
    if isinstance(server, str):
        if not server.startswith(("http://", "https://")):
            raise ValueError(
                f"an MCP server is a URL (http:// or https://) or a command as a list of "
                f"words, not {server!r}"
            )
        default = urlsplit(server).hostname or "mcp"
        endpoint = _Endpoint(name or default, url=server, headers=headers)
    else:
        argv = tuple(server)
        if not argv:
            raise ValueError("the command that starts the MCP server is empty")
        if headers is not None:
            raise ValueError("headers are for an MCP server reached by URL")
        default = os.path.splitext(os.path.basename(argv[-1]))[0] or "mcp"
        endpoint = _Endpoint(
            name or default, argv=argv, env=env, cwd=None if cwd is None else os.fspath(cwd)
        )
    if timeout <= 0:
        raise ValueError("timeout must be > 0 seconds")
    return _Connect(endpoint, allow, prefix, timeout)
