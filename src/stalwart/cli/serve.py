"""``stalwart serve``: an HTTP API over an app's policies (:mod:`stalwart.api`).

``--app`` is imported once, at start, and is the only thing imported: a
request names a policy among those it provides. Tokens come from
``--token`` (repeatable) or ``STALWART_API_TOKENS`` (a comma list) and are
never printed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..core.errors import CLIError

if TYPE_CHECKING:
    from ..core.events import Hook
from .apps import AppOption, app_policies
from .command import DEFAULT_STORE, StoreOption, fail, open_store
from .scrape import (
    MetricsHostOption,
    MetricsPortOption,
    check_port,
    metrics_lifespan,
    new_metrics,
)

__all__ = [
    "BodyTimeoutOption",
    "HeaderTimeoutOption",
    "IdleTimeoutOption",
    "MaxConnectionsOption",
    "serve",
]

TOKENS_ENV = "STALWART_API_TOKENS"

# What a client may hold of a server, shared by ``stalwart serve`` and
# ``stalwart ui`` (the defaults are those of stalwart.http.serving.Limits).
HeaderTimeoutOption = Annotated[
    float,
    typer.Option(
        "--header-timeout",
        metavar="SECONDS",
        help="seconds a request's headers may take to arrive (then 408)",
    ),
]
BodyTimeoutOption = Annotated[
    float,
    typer.Option(
        "--body-timeout",
        metavar="SECONDS",
        help="seconds a request's body may take after its headers (then 408)",
    ),
]
IdleTimeoutOption = Annotated[
    float,
    typer.Option(
        "--idle-timeout",
        metavar="SECONDS",
        help="seconds a connection may send nothing before it is closed",
    ),
]
MaxConnectionsOption = Annotated[
    int,
    typer.Option("--max-connections", help="most connections held at once (then 503 and close)"),
]


def serve(
    app_spec: AppOption,
    store: StoreOption = DEFAULT_STORE,
    host: Annotated[
        str, typer.Option(help="address to bind; --no-auth only on 127.0.0.1")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    token: Annotated[
        list[str] | None,
        typer.Option(
            "--token",
            help=f"a bearer token clients send (repeat for several; or ${TOKENS_ENV}, commas)",
        ),
    ] = None,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="serve without tokens (loopback addresses only)")
    ] = False,
    execute: Annotated[
        bool,
        typer.Option(
            "--execute", help="also execute the runs (a worker too); default: enqueue only"
        ),
    ] = False,
    static: Annotated[
        Path | None,
        typer.Option(help="a folder served at / (a page calling the API; public files)"),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(help="with --execute: most runs executed at once")
    ] = 50,
    max_streams: Annotated[
        int,
        typer.Option("--max-streams", min=1, help="most event streams served at once (then 503)"),
    ] = 100,
    header_timeout: HeaderTimeoutOption = 10.0,
    body_timeout: BodyTimeoutOption = 30.0,
    idle_timeout: IdleTimeoutOption = 5.0,
    max_connections: MaxConnectionsOption = 500,
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = "127.0.0.1",
) -> None:
    """Serve an HTTP API: start, read, list, stream, signal and cancel runs of --app's policies."""
    from ..api import serve as serve_api
    from ..core.errors import StalwartError
    from ..http.serving import Limits

    tokens = list(token or [])
    if not tokens and not no_auth:
        tokens = [t.strip() for t in os.environ.get(TOKENS_ENV, "").split(",") if t.strip()]
    try:
        limits = Limits(header_timeout, body_timeout, idle_timeout, max_connections)
        policies = app_policies(app_spec)
        hooks: list[Hook] = []
        lifespan = None
        if metrics_port is not None:  # only then: no hook and no import otherwise
            check_port(metrics_host, metrics_port)
            metrics = new_metrics()
            hooks.append(metrics)
            lifespan = metrics_lifespan(metrics, metrics_port, metrics_host)
        serve_api(
            open_store(store, must_exist=False),
            policies,
            host=host,
            port=port,
            tokens=tokens,
            no_auth=no_auth,
            execute=execute,
            static=static,
            concurrency=concurrency,
            max_streams=max_streams,
            limits=limits,
            hooks=hooks,
            lifespan=lifespan,
        )
    except CLIError as exc:
        fail(str(exc), exc.code)
    except (ValueError, StalwartError) as exc:  # no tokens, a short one, a bad folder or limit
        fail(f"serve: {exc}", 2)
