"""The live session with one MCP server, behind a toolbox's tools.

One session per toolbox: opened on the first live need, shared by every call
(concurrent ones included), opened again after the server went away, closed
by :meth:`~stalwart.mcp.Toolbox.aclose` or the end of ``async with``. The
session lives in a task of its own, because the SDK's transports must be
entered and left in one task while the calls come from the engine's tasks.

Each live call keeps the third durability rule of :mod:`stalwart.mcp.toolbox`
here: it checks the tool against the server's live listing before sending it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import stalwart as sw
from mcp import Client, StdioServerParameters

from ..core.errors import ServerUnavailable, ToolChanged, ToolError
from .asks import Asks, InFlight
from .content import message_of, text_of

__all__ = ["Connection", "Endpoint", "Progress", "RemoteTool"]

_log = logging.getLogger("stalwart.mcp")

_T = TypeVar("_T")

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
class Endpoint:
    """How to reach a server. Never recorded: it may hold credentials, so
    only :meth:`describe` may reach an error message."""

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


class RemoteTool(Protocol):
    """What a call needs of the tool it sends: the server's name for it, the
    schema the run listed, and the name the model was offered (for progress).
    A protocol, so the session knows nothing of policies or toolboxes."""

    @property
    def remote(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def schema(self) -> dict[str, Any]: ...


class Connection:
    """The live session with one server, opened on demand, again after a death."""

    def __init__(self, endpoint: Endpoint, timeout: float, model: Any | None = None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.asks = Asks(endpoint.name, model)
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
                asks = self.asks
                client = await stack.enter_async_context(
                    Client(
                        target,
                        read_timeout_seconds=self.timeout,
                        sampling_callback=asks.sampling if asks.model is not None else None,
                        elicitation_callback=asks.elicitation,
                        logging_callback=asks.logging,
                        log_level="info",
                    )
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
    async def call(
        self, ctx: sw.Context, tool: RemoteTool, arguments: dict[str, Any]
    ) -> sw.Message:
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
            result, stop = await self._sent(
                ctx, tool, client.call_tool(
                    tool.remote, arguments, read_timeout_seconds=self.timeout,
                    progress_callback=report,
                ),
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
        if stop is not None:  # answering the server stopped it (a wait suspends the run)
            raise stop
        assert result is not None
        if result.is_error:
            raise ToolError(text_of(result))
        return message_of(result, tool.name)

    async def _sent(
        self, ctx: sw.Context, tool: RemoteTool, sending: Coroutine[Any, Any, types.CallToolResult]
    ) -> tuple[types.CallToolResult | None, BaseException | None]:
        """The call's result, the call known as in flight meanwhile, so what
        the server asks during it is answered in its step; or, when answering
        the server stopped the call (a wait for a person suspends the run, an
        answer that does not fit), what stopped it."""
        call = InFlight(ctx, tool.name)
        self.asks.calls.append(call)
        task = asyncio.ensure_future(sending)
        try:
            await asyncio.wait((task, call.interrupt), return_when=asyncio.FIRST_COMPLETED)
            if call.interrupt.done():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.timeout):
                        await call.settled()
                return None, call.interrupt.result()
            return task.result(), None
        finally:
            self.asks.calls.remove(call)
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def requested(self, what: str, ask: Callable[[Client], Awaitable[_T]]) -> _T:
        """What ``ask`` gets from the open session (a listing, a read), with
        the errors a tool call has: the server unreachable or gone, a refusal."""
        client, _ = await self.session()
        server = self.endpoint.name
        try:
            async with asyncio.timeout(self.timeout):
                return await ask(client)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                await self.lost(client)
                raise ServerUnavailable(
                    f"MCP server {server!r} went away during {what}: {exc.message}"
                ) from None
            raise ToolError(f"MCP server {server!r} refused {what}: {exc.message}") from None
        except TimeoutError:
            raise TimeoutError(
                f"MCP server {server!r} did not answer {what} within {self.timeout} s"
            ) from None


def _describe(exc: BaseException) -> str:
    """One line for an error that may come wrapped in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or "(no message)"
    return f"{type(exc).__name__}: {text}"


def _json(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))
