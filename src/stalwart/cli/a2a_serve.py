"""``stalwart a2a serve``: a policy or an ``llm.Agent`` as an A2A agent (:mod:`stalwart.a2a`).

``--app MODULE:ATTR`` is imported once, at start, and names the one agent
served; a task's run resumes only under it (S13). The runner serves: on a
durable store it resumes the tasks a previous server left unfinished.
"""

from __future__ import annotations

from types import ModuleType
from typing import Annotated

import typer

from ..core.errors import CLIError, StalwartError
from .apps import load_app
from .command import DEFAULT_STORE, StoreOption, fail
from .serve import BodyTimeoutOption, HeaderTimeoutOption, IdleTimeoutOption, MaxConnectionsOption

__all__ = ["a2a_serve"]


def a2a_serve(
    app_spec: Annotated[
        str,
        typer.Option(
            "--app",
            metavar="MODULE:ATTR",
            help="the agent to serve: a policy or an llm.Agent, as module:attr",
        ),
    ],
    store: StoreOption = DEFAULT_STORE,
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 9000,
    url: Annotated[
        str | None,
        typer.Option(
            help="the URL clients reach the agent at (its card says it); default http://HOST:PORT/"
        ),
    ] = None,
    conversation: Annotated[
        bool,
        typer.Option(
            "--conversation",
            help="each contextId a durable conversation with the agent, each task a turn of it",
        ),
    ] = False,
    header_timeout: HeaderTimeoutOption = 10.0,
    body_timeout: BodyTimeoutOption = 30.0,
    idle_timeout: IdleTimeoutOption = 5.0,
    max_connections: MaxConnectionsOption = 500,
) -> None:
    """Serve a policy or an agent as an A2A agent: each task a durable run."""
    from .. import a2a
    from ..http.serving import Limits, run
    from ..runner import Runner

    try:
        target = load_app(app_spec)
        if isinstance(target, ModuleType):
            raise CLIError(
                f"a2a serve: --app {app_spec!r} names a module; name the agent in it "
                "as MODULE:ATTR",
                code=2,
            )
        limits = Limits(header_timeout, body_timeout, idle_timeout, max_connections)
        runner = Runner(store, serving=True)
        where = url or f"http://{host}:{port}/"
        app = a2a.build_app(target, runner, url=where, conversation=conversation)
    except CLIError as exc:
        fail(str(exc), exc.code)
    except (ValueError, TypeError, StalwartError) as exc:
        fail(f"a2a serve: {exc}", 2)
    run(app, host=host, port=port, limits=limits, log_level="warning")
