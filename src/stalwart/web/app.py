"""The inspector's application: a Starlette app over one store, and ``serve``.

The web process reads through the :class:`~stalwart.stores.Store` interface
and acts through a :class:`~stalwart.Runner` opened with ``serving=False``:
it signals, cancels and forks (:mod:`.actions`), and never executes a run
(a worker does). It holds
no policies, so it could not execute one if it tried.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..core.errors import StoreError
from ..http.access import (
    LOOPBACK_NAMES,
    check_tokens,
    is_loopback,
    loopback_hosts,
    url_host,
)
from ..http.errors import ServerErrors
from ..runner import Runner
from ..runner.registry import Registry
from ..stores import Store
from . import experiments, views
from .security import Guard, new_token

if TYPE_CHECKING:
    from ..http.serving import Limits
    from ..llm import Price

__all__ = ["create_app", "serve"]

_STATIC = Path(__file__).parent / "static"


def create_app(
    store: str | Store,
    *,
    token: str | None = None,
    hosts: Collection[str] | None = tuple(sorted(LOOPBACK_NAMES)),
    refresh: float = 2.0,
    policies: Iterable[Any] = (),
    prices: Mapping[str, Price] | None = None,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
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
    ``prices``: the price table a run's token usage is priced by where its
    provider recorded no cost (:func:`stalwart.llm.read_prices`).
    ``lifespan``: more to do while the app serves, as Starlette's
    ``lifespan``: entered once the runner is open (``app.state.runner``),
    left before it closes; ``stalwart ui --metrics-port`` serves the
    metrics this way.
    """
    runner = Runner(store, serving=False, poll_interval=5.0)
    if runner.store.ephemeral:
        raise StoreError("the inspector needs a durable store: sqlite:///… or postgresql://…")

    @contextlib.asynccontextmanager
    async def lifespan_of(app: Starlette) -> AsyncIterator[None]:
        await runner.open()
        try:
            if lifespan is None:
                yield
            else:
                async with lifespan(app):
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
            Route("/run/fork", views.fork, methods=["POST"]),
            Route("/run/rerun", views.rerun, methods=["POST"]),
            Route("/compare", views.compare_page),
            Route("/waiting", views.waiting_page),
            Route("/waiting/live", views.waiting_live),
            Route("/health", views.health_page),
            Route("/experiments", experiments.experiments_page),
            Route("/experiments/compare", experiments.compare_page),
            Mount("/static", StaticFiles(directory=_STATIC), name="static"),
        ],
        middleware=[
            Middleware(
                ServerErrors, who="the inspector"
            ),  # outermost of ours: it answers for the Guard too
            Middleware(BaseHTTPMiddleware, dispatch=Guard(token, hosts)),
        ],
        exception_handlers={StoreError: views.store_error},
        lifespan=lifespan_of,
    )
    app.state.runner = runner
    app.state.refresh = refresh
    app.state.prices = None if prices is None else dict(prices)
    app.state.policies = Registry()
    for target in policies:
        app.state.policies.register(target)
    return app


def serve(
    store_url: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    *,
    say: Callable[[str], object] | None = None,
    limits: Limits | None = None,
    policies: Iterable[Any] = (),
    prices: Mapping[str, Price] | None = None,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
) -> None:
    """Serve the inspector until interrupted.

    On a loopback address no token is needed unless one is given; bound
    anywhere else, a token is required, made up here if not given, and
    printed with the address to open (an address it listens on). ``limits``:
    the deadlines and the connection count that hold against slow clients
    (:class:`stalwart.http.serving.Limits`; its defaults when None).
    ``policies``: the application's, read for their parameter names only
    (see :func:`create_app`). ``prices``: what token usage is priced by.
    ``lifespan``: as :func:`create_app`'s.
    """
    from ..http.serving import Limits, run

    limits = Limits() if limits is None else limits
    local = is_loopback(host)
    if token is not None:
        check_tokens([token], "--token")  # the words a user typed: ``stalwart ui`` calls this
    if not local and token is None:
        token = new_token()
    hosts = loopback_hosts(host) if local else None
    app = create_app(
        store_url, token=token, hosts=hosts, policies=policies, prices=prices, lifespan=lifespan
    )
    url = f"http://{url_host(host)}:{port}/"
    if token is not None:
        url += f"?token={token}"
    (say or _say)(f"stalwart ui: open {url}")
    run(app, host=host, port=port, limits=limits, log_level="warning", server_header=False)


def _say(text: str) -> None:
    print(text, flush=True)
