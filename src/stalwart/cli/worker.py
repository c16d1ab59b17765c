"""``stalwart worker``: serve the store's queues until SIGTERM.

The worker executes runs under the policies ``--app`` provides, and nothing
else: a run naming any other policy waits for a worker that has it (S13).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..core.errors import CLIError
from .apps import AppOption, app_policies
from .command import (
    DEFAULT_STORE,
    StoreOption,
    console,
    execute,
    fail,
    lit,
    open_store,
    store_url,
)
from .logs import LogFormat, LogLevel, configure_logging
from .scrape import MetricsHostOption, MetricsPortOption
from .versions import checked

if TYPE_CHECKING:
    from ..llm import Price

__all__ = ["read_price_file", "worker"]


def read_price_file(path: Path) -> dict[str, Price]:
    """The price table in ``path`` (JSON), or a CLIError naming the file and
    what in it is wrong."""
    from ..llm import read_prices

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"--prices {path}: cannot read it: {exc}", code=2) from exc
    except ValueError as exc:
        raise CLIError(f"--prices {path}: not JSON: {exc}", code=2) from exc
    try:
        return read_prices(data, where=f"--prices {path}")
    except ValueError as exc:
        raise CLIError(str(exc), code=2) from exc


def worker(
    store: StoreOption = DEFAULT_STORE,
    app_spec: AppOption = "",
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue", "-q", metavar="NAME", help="queue to take runs from (repeat; default: all)"
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(metavar="N", help="most runs this worker executes at once")
    ] = 50,
    lease: Annotated[
        float, typer.Option(metavar="SECONDS", help="seconds a claim lasts without a heartbeat")
    ] = 30.0,
    shutdown_timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="seconds held runs may finish after SIGTERM")
    ] = 30.0,
    log_level: Annotated[
        LogLevel,
        typer.Option("--log-level", help="least severe log records written", case_sensitive=False),
    ] = LogLevel.info,
    log_format: Annotated[
        LogFormat,
        typer.Option("--log-format", help="text, or json: one object a line (docs/cli.md)"),
    ] = LogFormat.text,
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = "127.0.0.1",
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            metavar="FILE",
            help="JSON price table (model -> {input, output} per million tokens) for "
            "the stalwart_model_cost metric (with --metrics-port)",
        ),
    ] = None,
    version: Annotated[
        str | None,
        typer.Option(
            "--version",
            metavar="VERSION",
            help="this deploy's application version, recorded by the runs it starts "
            "(default: a digest of its policies' code; docs/deploy.md)",
        ),
    ] = None,
) -> None:
    """Execute runs from the store's queues until SIGTERM (then finish or hand back).

    Logs go to stderr: each run claimed, suspended, resumed, finished, at
    INFO. With ``--log-format json`` nothing else is printed, so a log
    pipeline reads only JSON.
    """
    if not app_spec:
        # A worker executes runs only under the policies --app provides (S13):
        # without any it would claim nothing and tick no schedule, for ever.
        fail(
            "stalwart worker needs --app MODULE (or MODULE:ATTR, or a file.py): it executes "
            "runs only under the policies --app provides, and without any it would serve "
            "for ever doing nothing",
            2,
        )
    if prices is not None and metrics_port is None:
        fail("--prices prices the metrics; it needs --metrics-port PORT", 2)
    if version is not None:
        version = checked(version, "--version")
    configure_logging(log_level, log_format)
    log = logging.getLogger("stalwart.worker")
    human = log_format is LogFormat.text

    async def go() -> None:
        from ..runner import Runner
        from ..schedules import Schedules

        policies = app_policies(app_spec)
        if not policies:
            raise CLIError(
                f"--app {app_spec!r} provides no policy: a worker under it would execute "
                "nothing; name the module that defines your policies, or MODULE:ATTR",
                code=2,
            )
        metrics = None
        if metrics_port is not None:  # only then: no hook and no import otherwise
            from ..metrics import Metrics

            metrics = Metrics(prices=None if prices is None else read_price_file(prices))
        runner = Runner(
            open_store(store, must_exist=False),
            hooks=() if metrics is None else (metrics,),
            policies=policies,
            queues=queue or None,
            concurrency=concurrency,
            lease=lease,
            shutdown_timeout=shutdown_timeout,
            code_version=version,
        )
        Schedules(runner)  # its loop ticks the store's schedules while it serves
        names = ", ".join(sorted({p.name for p in policies}))
        app_version = runner.app_version
        queues = ", ".join(queue) if queue else "all"
        where = store_url(runner)
        if human:
            console().print(
                f"worker {lit(runner.owner)}: store {lit(where)}, queues {lit(queues)}, "
                f"concurrency {concurrency}, policies {lit(names)}, version {lit(app_version)}",
                soft_wrap=True,
            )
        facts = {"owner": runner.owner, "store": where, "queues": queues, "version": app_version}
        log.info(
            "worker started: concurrency %d, policies %s, version %s",
            concurrency,
            names,
            app_version,
            extra={**facts, "concurrency": concurrency, "policies": names},
        )
        server = None
        if metrics is not None:
            assert metrics_port is not None
            try:
                server = metrics.serve(runner, metrics_port, metrics_host)
            except OSError as exc:
                raise CLIError(
                    f"--metrics-port {metrics_port}: cannot serve metrics on "
                    f"{metrics_host}:{metrics_port}: {exc}",
                    code=2,
                ) from exc
            url = f"http://{metrics_host}:{server.port}/metrics"
            log.info("metrics at %s", url, extra={**facts, "metrics": url})
        try:
            await runner.serve()
        finally:
            if server is not None:
                server.close()
        log.info("worker stopped", extra=facts)
        if human:
            console().print("worker stopped")

    execute(go)
