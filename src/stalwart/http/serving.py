"""How Stalwart's HTTP servers hold against slow, idle and too many clients.

``stalwart serve`` (the API) and ``stalwart ui`` (the inspector) both run
under uvicorn, which waits for ever for a request's head and body: a client
that sends nothing, its headers a line a second or its body a byte a second
keeps a connection, and enough of them keep them all. :func:`run` serves an
ASGI application with :class:`Limits`, each a deadline or a count the
connection itself enforces, below the application:

- **idle**: a connection that sends nothing, when it opens or after a
  response, is closed after ``idle_timeout`` seconds;
- **header**: a request's head (request line and headers) must be complete
  within ``header_timeout`` seconds of the connection waiting for it; else
  ``408`` and the connection is closed;
- **body**: a request's body must be complete within ``body_timeout``
  seconds of its head; else ``408`` (or, once a response has begun, the
  connection is closed) and the application sees the client gone;
- **connections**: at most ``max_connections`` at once; one past them is
  answered ``503`` with ``Retry-After`` and closed at once, so a request on
  any connection within the limit is served as usual.

A response being sent, an event stream included, has no deadline here: these
limits bound what a client sends, not how long the server answers.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .access import SECURITY_HEADERS

if TYPE_CHECKING:
    from uvicorn._types import ASGIReceiveCallable, ASGISendCallable, Scope
    from uvicorn.config import Config
    from uvicorn.server import ServerState

__all__ = ["Limits", "protocol_class", "run"]


@dataclass(frozen=True)
class Limits:
    """What a server allows a client: three deadlines (seconds) and a count.

    Each timeout is a finite number of seconds above 0 and ``max_connections``
    at least 1; anything else is a ValueError naming the setting and its
    flag.
    """

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    idle_timeout: float = 5.0
    max_connections: int = 500

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "idle_timeout"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(
                    f"{name} (--{name.replace('_', '-')}) is a number of seconds above 0, "
                    f"not {value!r}"
                )
        count = self.max_connections
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"max_connections (--max-connections) is at least 1, not {count!r}")


def _refusal(status: int, reason: str, message: str, extra: dict[str, str] | None = None) -> bytes:
    """A complete HTTP/1.1 response that closes the connection: a JSON
    ``{"error": ...}`` as the API's, with the security headers every
    response carries. Written straight to the socket: the request it refuses
    never reached the application."""
    body = json.dumps({"error": message, "fields": []}).encode()
    headers = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "connection": "close",
        **(extra or {}),
        **SECURITY_HEADERS,
    }
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("ascii") + b"\r\n" + body


def protocol_class(limits: Limits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, one instance per connection, holding ``limits``.

    The deadlines are timers on the event loop, armed and cancelled at the
    points uvicorn's protocol passes through: the connection opening, a
    request's head parsed (a new request cycle), its body complete (the cycle
    has no more body), a response complete. uvicorn is imported here, when a
    server starts, so that this module stays importable without it.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class LimitedProtocol(H11Protocol):
        """The protocol of one connection, under the server's ``limits``."""

        def __init__(
            self,
            config: Config,
            server_state: ServerState,
            app_state: dict[str, Any],
            _loop: asyncio.AbstractEventLoop | None = None,
        ) -> None:
            super().__init__(config, server_state, app_state, _loop)
            self._idle: asyncio.TimerHandle | None = None
            self._head: asyncio.TimerHandle | None = None
            self._body: asyncio.TimerHandle | None = None
            self._body_of: object = None  # the request cycle the body deadline is for
            self._cut = (
                False  # this server cut the client off: what the app raises then is expected
            )
            app = self.app

            async def guarded(
                scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
            ) -> None:
                try:
                    await app(scope, receive, send)
                except Exception:
                    if not self._cut:  # cut off mid-body, the app's ClientDisconnect is no error
                        raise

            self.app = guarded

        # The connection's life.

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                self._refuse(
                    _refusal(
                        503,
                        "Service Unavailable",
                        f"this server holds {limits.max_connections} connections at most "
                        "(--max-connections); try again shortly",
                        {"retry-after": "1"},
                    )
                )
                return
            self._await_request()

        def connection_lost(self, exc: Exception | None) -> None:
            for timer in (self._idle, self._head, self._body):
                if timer is not None:
                    timer.cancel()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._idle is not None:
                self._idle.cancel()
                self._idle = None
            super().data_received(data)

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            cycle = self.cycle
            if cycle is None or self.transport.is_closing():
                return
            if cycle is not before and self._head is not None:  # a request's head is complete
                self._head.cancel()
                self._head = None
            if cycle.more_body and self._body_of is not cycle:
                if self._body is not None:
                    self._body.cancel()
                self._body_of = cycle
                self._body = self.loop.call_later(limits.body_timeout, self._body_late)
            elif not cycle.more_body and self._body is not None and self._body_of is cycle:
                self._body.cancel()
                self._body = None

        def on_response_complete(self) -> None:
            if not self.transport.is_closing() and not (self.cycle and self.cycle.more_body):
                # Before uvicorn reads a pipelined request, which disarms them; a body
                # still arriving keeps its own deadline instead.
                self._await_request()
            super().on_response_complete()

        # The deadlines.

        def _await_request(self) -> None:
            """Wait for the next request: idle and header deadlines from now."""
            for timer in (self._idle, self._head):
                if timer is not None:
                    timer.cancel()
            self._idle = self.loop.call_later(limits.idle_timeout, self._idle_over)
            self._head = self.loop.call_later(limits.header_timeout, self._head_late)

        def _idle_over(self) -> None:
            self._idle = None
            if not self.transport.is_closing():
                self._cut = True
                self.transport.close()

        def _head_late(self) -> None:
            self._head = None
            if not self.transport.is_closing():
                self._refuse(
                    _refusal(
                        408,
                        "Request Timeout",
                        f"the request's headers were not complete within "
                        f"{limits.header_timeout:g} s (--header-timeout)",
                    )
                )

        def _body_late(self) -> None:
            self._body = None
            cycle = self.cycle
            if self.transport.is_closing() or cycle is None or not cycle.more_body:
                return
            started = cycle.response_started
            cycle.disconnected = True  # the app's reads see the client gone; its writes go nowhere
            cycle.message_event.set()
            if started:
                self._cut = True
                self.transport.close()
                return
            self._refuse(
                _refusal(
                    408,
                    "Request Timeout",
                    f"the request's body was not complete within "
                    f"{limits.body_timeout:g} s (--body-timeout)",
                )
            )

        def _refuse(self, response: bytes) -> None:
            self._cut = True
            self.transport.write(response)
            self.transport.close()

    return LimitedProtocol


def run(app: Any, *, host: str, port: int, limits: Limits, **options: Any) -> None:
    """Serve ``app`` with uvicorn on ``host``:``port`` under ``limits`` until
    interrupted. ``options`` go to ``uvicorn.run`` as they are (log level,
    server header, graceful shutdown)."""
    import uvicorn

    uvicorn.run(
        app,
        host=host,
        port=port,
        http=protocol_class(limits),
        # uvicorn's own keep-alive timer never fires first: ours closes at idle_timeout.
        timeout_keep_alive=math.ceil(limits.idle_timeout) + 1,
        **options,
    )
