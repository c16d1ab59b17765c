"""``stalwart ui``: the web inspector over a store (:mod:`stalwart.web`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .command import DEFAULT_STORE, StoreOption, fail
from .scrape import (
    MetricsHostOption,
    MetricsPortOption,
    check_port,
    metrics_lifespan,
    new_metrics,
)
from .serve import BodyTimeoutOption, HeaderTimeoutOption, IdleTimeoutOption, MaxConnectionsOption

__all__ = ["ui"]


def ui(
    store: StoreOption = DEFAULT_STORE,
    host: Annotated[
        str, typer.Option(help="address to bind; anything but loopback requires a token")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            help="access token, at least 16 characters, no spaces "
            "(made up and printed when bound beyond loopback)"
        ),
    ] = None,
    header_timeout: HeaderTimeoutOption = 10.0,
    body_timeout: BodyTimeoutOption = 30.0,
    idle_timeout: IdleTimeoutOption = 5.0,
    max_connections: MaxConnectionsOption = 500,
    app_spec: Annotated[
        str,
        typer.Option(
            "--app",
            metavar="MODULE",
            help="Your policies (as `worker --app`): inputs are shown by parameter name; "
            "nothing is executed.",
        ),
    ] = "",
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            metavar="FILE",
            help='JSON price table, {"model": {"input": N, "output": N}} per million tokens '
            "(as `worker --prices`): prices token usage a provider recorded no cost for",
        ),
    ] = None,
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = "127.0.0.1",
) -> None:
    """Open the web inspector: runs, steps, conversations, approvals waiting for a human."""
    from ..core.errors import StalwartError
    from ..http.serving import Limits
    from ..web import serve
    from .apps import app_policies
    from .worker import read_price_file

    try:
        limits = Limits(header_timeout, body_timeout, idle_timeout, max_connections)
        policies = app_policies(app_spec) if app_spec else []
        table = None if prices is None else read_price_file(prices)
        lifespan = None
        if metrics_port is not None:  # the store's gauges; the inspector executes nothing
            check_port(metrics_host, metrics_port)
            lifespan = metrics_lifespan(new_metrics(), metrics_port, metrics_host)
        # The banner in plain print: never wrapped.
        serve(
            store,
            host=host,
            port=port,
            token=token,
            limits=limits,
            policies=policies,
            prices=table,
            lifespan=lifespan,
        )
    except (ValueError, StalwartError) as exc:  # a weak token or limit, a store it cannot inspect
        fail(f"ui: {exc}", 2)
