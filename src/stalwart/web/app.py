"""The inspector's application: a Starlette app over one store, and ``serve``.

The web process reads through the :class:`~stalwart.stores.Store` interface
and acts through a :class:`~stalwart.Runner` opened with ``serving=False``:
it signals and cancels, and never executes a run (a worker does). It holds
no policies, so it could not execute one if it tried.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core.errors import StoreError
from ..http.access import (
    LOOPBACK_NAMES,
    SECURITY_HEADERS,
    check_tokens,
    is_loopback,
    loopback_hosts,
    url_host,
)
from ..runner import Runner
from ..runner.registry import Registry
from ..stores import Store
from . import views
from .security import Guard, new_token

if TYPE_CHECKING:
    from ..http.serving import Limits

__all__ = ["ServerErrors", "create_app", "serve"]

_STATIC = Path(__file__).parent / "static"


def create_app(
    store: str | Store,
    *,
    token: str | None = None,
    hosts: Collection[str] | None = tuple(LOOPBACK_NAMES),
    refresh: float = 2.0,
    policies: Iterable[Any] = (),
) -> Starlette:
    """The inspector for ``store`` (a URL or an unopened Store).

    ``token``: required on every request when given (at least 16
    characters, no spaces: :func:`~stalwart.http.access.check_tokens`).
    ``hosts``: the host names requests may address (None: any; see
    :class:`.security.Guard`).
    ``refresh``: seconds between live updates of a page.
    ``policies``: the application's policies, when at hand: their
    parameters name a run's inputs on its page (never given to the runner:
    the inspector still executes nothing).
    """
    runner = Runner(store, serving=False, poll_interval=5.0)
    if runner.store.ephemeral:
        raise StoreError("the inspector needs a durable store: sqlite:///… or postgresql://…")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await runner.open()
        try:
            yield
        finally:
            await runner.close()

    app = Starlette(
        routes=[
            Route("/", views.home),
            Route("/runs", views.runs_page),
            Route("/runs/live", views.runs_live),
            Route("/run", views.run_page),
            Route("/run/value", views.value_page),
            Route("/run/live", views.run_live),
            Route("/run/signal", views.signal, methods=["POST"]),
            Route("/run/cancel", views.cancel, methods=["POST"]),
            Route("/waiting", views.waiting_page),
            Route("/waiting/live", views.waiting_live),
            Mount("/static", StaticFiles(directory=_STATIC), name="static"),
        ],
        middleware=[
            Middleware(ServerErrors),  # outermost of ours: it answers for the Guard too
            Middleware(BaseHTTPMiddleware, dispatch=Guard(token, hosts)),
        ],
        exception_handlers={StoreError: views.store_error},
        lifespan=lifespan,
    )
    app.state.runner = runner
    app.state.refresh = refresh
    app.state.policies = Registry()
    for target in policies:
        app.state.policies.register(target)
    return app


class ServerErrors:
    """ASGI middleware: an exception no handler took is answered as the
    API answers one, a JSON problem (500: ``{"error": ..., "fields": []}``)
    with the security headers every page carries, naming its type and
    nothing of its text (which may quote ledger data); then raised on, for
    the server to log.

    Starlette's own error middleware sits outside every middleware an app
    is given, the Guard that adds the headers included, and answers
    ``text/plain`` without them: this one is the first the app is given, so
    it is inside that one and outside the Guard (a failing Guard included).
    After the response has started nothing can be said; the exception is
    raised on alone.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if not started:
                message = (
                    f"internal error ({type(exc).__name__}): the inspector failed to answer "
                    "this request; its log has the details"
                )
                response = JSONResponse({"error": message, "fields": []}, 500)
                response.headers.update(SECURITY_HEADERS)
                await response(scope, receive, send)
            raise


def serve(
    store_url: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    *,
    say: Callable[[str], object] | None = None,
    limits: Limits | None = None,
    policies: Iterable[Any] = (),
) -> None:
    """Serve the inspector until interrupted.

    On a loopback address no token is needed unless one is given; bound
    anywhere else, a token is required, made up here if not given, and
    printed with the address to open (an address it listens on). ``limits``:
    the deadlines and the connection count that hold against slow clients
    (:class:`stalwart.http.serving.Limits`; its defaults when None).
    ``policies``: the application's, read for their parameter names only
    (see :func:`create_app`).
    """
    from ..http.serving import Limits, run

    limits = Limits() if limits is None else limits
    local = is_loopback(host)
    if token is not None:
        check_tokens([token], "--token")  # the words a user typed: ``stalwart ui`` calls this
    if not local and token is None:
        token = new_token()
    hosts = loopback_hosts(host) if local else None
    app = create_app(store_url, token=token, hosts=hosts, policies=policies)
    url = f"http://{url_host(host)}:{port}/"
    if token is not None:
        url += f"?token={token}"
    (say or _say)(f"stalwart ui: open {url}")
    run(app, host=host, port=port, limits=limits, log_level="warning", server_header=False)


def _say(text: str) -> None:
    print(text, flush=True)
