"""``--metrics-port`` for the commands that serve HTTP (``stalwart serve``,
``stalwart ui``): Prometheus metrics on a port of their own, beside the app.

The metrics (:mod:`stalwart.metrics`) and the apps (:mod:`stalwart.api`,
:mod:`stalwart.web`) know nothing of each other; this module composes them:
the app's runner takes the :class:`~stalwart.metrics.Metrics` hook, and the
app's ``lifespan`` serves ``/metrics`` once that runner is open, on
``--metrics-host:--metrics-port``, without the app's token (docs/metrics.md
says why).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Annotated

import typer

from ..core.errors import CLIError

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..metrics import Metrics

__all__ = [
    "MetricsHostOption",
    "MetricsPortOption",
    "check_port",
    "metrics_lifespan",
    "new_metrics",
]

MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics, without a token "
        "(stalwart[metrics])",
    ),
]
MetricsHostOption = Annotated[
    str, typer.Option("--metrics-host", metavar="HOST", help="address --metrics-port binds")
]


def check_port(host: str, port: int) -> None:
    """Fail now, naming the port, if ``host:port`` cannot be bound (taken,
    not ours): the metrics server binds it only once the app has started."""
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
            probe.bind(address)
    except OSError as exc:
        raise CLIError(
            f"--metrics-port {port}: cannot serve metrics on {host}:{port}: {exc}", code=2
        ) from exc


def new_metrics() -> Metrics:
    """A :class:`~stalwart.metrics.Metrics` hook, or a CLIError saying which
    extra to install."""
    try:
        from ..metrics import Metrics
    except ImportError as exc:
        raise CLIError(f"--metrics-port: {exc}", code=2) from exc
    return Metrics()


def metrics_lifespan(
    metrics: Metrics, port: int, host: str
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """An app ``lifespan`` serving ``metrics`` for the app's runner
    (``app.state.runner``) on ``host:port`` while the app serves; the
    address is printed, as the app's banner is."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server = metrics.serve(app.state.runner, port, host)
        shown = f"[{host}]" if ":" in host else host
        print(f"metrics at http://{shown}:{server.port}/metrics", flush=True)
        try:
            yield
        finally:
            server.close()

    return lifespan
