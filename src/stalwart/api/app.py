"""The API's application: a Starlette app over one store and a set of policies.

Roles, as everywhere in Stalwart, are explicit. By default the API process
only enqueues: a start writes a pending run to the store and any worker
(``stalwart worker --app ...``) executes it, so any number of API processes
and workers can share one PostgreSQL. With ``execute=True`` the process is
also a worker (``Runner(serving=True)``) for the policies it serves: one
process on one host, with SQLite.

The policies are the ones the program passed in (``stalwart serve --app``
imports the application once, at start); a request names a policy by name
and gets one of those or a 404, never an import (S13).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..core.errors import StoreError
from ..core.events import Hook
from ..core.policy import Policy, as_policy
from ..http.access import (
    LOOPBACK_NAMES,
    check_tokens,
    is_loopback,
    loopback_hosts,
)
from ..http.errors import ServerErrors
from ..runner import Runner
from ..stores import Store
from . import routes
from .openapi import openapi_document
from .security import Guard

if TYPE_CHECKING:
    from ..http.serving import Limits

__all__ = ["create_app", "serve"]

MAX_BODY = 1 << 20  # bytes of a request body: inputs and signals, not uploads


def _policies(given: Sequence[Any]) -> dict[str, Policy[Any, Any]]:
    """The policies by name; one name, one policy; each callable over HTTP."""
    out: dict[str, Policy[Any, Any]] = {}
    for target in given:
        pol = as_policy(target)
        if pol.name in out and out[pol.name] is not pol:
            raise ValueError(f"two policies are named {pol.name!r}: give each its own name")
        keyword_only = {p.name for p in pol.signature.params if p.kind is p.KEYWORD_ONLY}
        clash = keyword_only & routes.ENQUEUE_WORDS
        if clash:
            raise ValueError(
                f"policy {pol.name!r} has keyword-only parameters named {sorted(clash)}, "
                "which a start cannot pass (they are enqueue's own words); make them positional"
            )
        out[pol.name] = pol
    if not out:
        raise ValueError("the API needs at least one policy to start runs of")
    return out


def _ui_routes() -> list[BaseRoute]:
    """The UI protocols' routes (:mod:`.aisdk`; :mod:`.agui` when the
    ``agui`` extra is installed)."""
    from . import aisdk

    out: list[BaseRoute] = [
        Route("/agents/{agent}/aisdk", aisdk.continue_chat, methods=["POST"]),
        Route("/agents/{agent}/aisdk/{conversation_id}/stream", aisdk.resume_chat),
        Route("/runs/{run_id}/aisdk", aisdk.run_chunks),
    ]
    try:
        from . import agui
    except ImportError:  # without ag-ui-protocol: no AG-UI routes
        return out
    return [
        *out,
        Route("/agents/{agent}/agui", agui.run_agent, methods=["POST"]),
        Route("/runs/{run_id}/agui", agui.run_events),
    ]


def create_app(
    store: str | Store,
    policies: Sequence[Any],
    *,
    tokens: Sequence[str] = (),
    hosts: Collection[str] | None = tuple(sorted(LOOPBACK_NAMES)),
    execute: bool = False,
    static: str | Path | None = None,
    poll: float = 0.5,
    concurrency: int | None = None,
    max_body: int = MAX_BODY,
    title: str = "Stalwart API",
    max_streams: int = routes.MAX_STREAMS,
    hooks: Sequence[Hook] = (),
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
) -> Starlette:
    """The API over ``store`` (a URL or an unopened Store) for ``policies``.

    ``tokens``: bearer tokens, one of which every request must carry; empty
    serves without (then ``hosts`` must be loopback names). ``hosts``: the
    host names a request may address (None: any). ``execute``: this process
    also executes runs (a worker for these policies). ``static``: a folder
    served at ``/`` (a page calling the API; public). ``poll``: seconds
    between a stream's reads of the store. ``max_streams``: most event
    streams served at once by this process; past it a stream request is
    answered 503 with ``Retry-After`` (other requests are not limited).
    ``hooks``: given to the app's runner (``Runner(hooks=...)``): with
    ``execute``, they observe the runs executed here. ``lifespan``: more to
    do while the app serves, as Starlette's ``lifespan``: entered once the
    runner is open (``app.state.runner``), left before it closes; ``stalwart
    serve --metrics-port`` serves the metrics this way.
    """
    table = _policies(policies)
    if isinstance(max_streams, bool) or not isinstance(max_streams, int) or max_streams < 1:
        raise ValueError(f"max_streams is a count of streams, at least 1, not {max_streams!r}")
    tokens = check_tokens(tokens, "tokens=")
    if not tokens and hosts is None:
        raise ValueError("an API without tokens answers to loopback host names only (hosts=)")
    runner = Runner(
        store,
        hooks=hooks,
        policies=list(table.values()),
        serving=execute,
        concurrency=concurrency,
        poll_interval=min(poll, 0.5),
    )
    if runner.store.ephemeral:
        raise StoreError("the API needs a durable store: sqlite:///… or postgresql://…")

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

    from .. import __version__

    api = routes.Api(
        runner=runner,
        policies=table,
        execute=execute,
        poll=poll,
        max_body=max_body,
        max_streams=max_streams,
        openapi=openapi_document(
            list(table.values()), title=title, version=__version__, auth=bool(tokens)
        ),
    )
    api_routes: list[BaseRoute] = [
        Route("/openapi.json", routes.openapi),
        Route("/policies", routes.list_policies),
        Route("/policies/{name}/runs", routes.start_run, methods=["POST"]),
        Route("/runs", routes.list_runs),
        Route("/runs/{run_id}", routes.get_run),
        Route("/runs/{run_id}/steps", routes.get_steps),
        Route("/runs/{run_id}/events", routes.stream_events),
        Route("/runs/{run_id}/signals/{name}", routes.send_signal, methods=["POST"]),
        Route("/runs/{run_id}/cancel", routes.cancel_run, methods=["POST"]),
        Route("/versions", routes.list_versions),
        Route("/versions/{version}/latest", routes.set_latest_version, methods=["POST"]),
        Route("/versions/{version}/retire", routes.retire_version, methods=["POST"]),
        Route("/conversations/{conversation_id}/messages", routes.send_message, methods=["POST"]),
        *_ui_routes(),
    ]
    if static is not None:
        folder = Path(static)
        if not folder.is_dir():
            raise ValueError(f"static folder {str(folder)!r} does not exist")
        api_routes.append(Mount("/", StaticFiles(directory=folder, html=True), name="static"))
    app = Starlette(
        routes=api_routes,
        middleware=[
            Middleware(
                ServerErrors, who="the server"
            ),  # outermost of ours: it answers for the Guard too
            Middleware(Guard, tokens=tokens, hosts=hosts, static=static is not None),
        ],
        exception_handlers=routes.ERROR_HANDLERS,
        lifespan=lifespan_of,
    )
    app.state.api = api
    app.state.runner = runner
    return app


def serve(
    store: str | Store,
    policies: Sequence[Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens: Sequence[str] = (),
    no_auth: bool = False,
    execute: bool = False,
    static: str | Path | None = None,
    concurrency: int | None = None,
    say: Callable[[str], object] | None = None,
    max_streams: int = routes.MAX_STREAMS,
    limits: Limits | None = None,
    hooks: Sequence[Hook] = (),
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
) -> None:
    """Serve the API with uvicorn until interrupted.

    Tokens are required unless ``no_auth``, which only a loopback ``host``
    may use. The banner names the address, the policies, the role and the
    number of tokens, never a token. ``limits``: the deadlines and the
    connection count that hold against slow clients
    (:class:`stalwart.http.serving.Limits`; its defaults when None).
    ``hooks`` and ``lifespan``: as :func:`create_app`'s.
    """
    from ..http.serving import Limits, run

    limits = Limits() if limits is None else limits
    local = is_loopback(host)
    if no_auth and tokens:
        raise ValueError("give tokens or no_auth, not both")
    if no_auth and not local:
        raise ValueError(
            f"auth can be turned off only on a loopback address (127.0.0.1), not {host!r}"
        )
    if not no_auth and not tokens:
        raise ValueError(
            "the API needs bearer tokens (--token, or STALWART_API_TOKENS as a comma list); "
            "on 127.0.0.1 only, --no-auth serves without"
        )
    tokens = check_tokens(tokens, "--token or $STALWART_API_TOKENS")  # the words a user typed
    app = create_app(
        store,
        policies,
        tokens=tokens,
        hosts=loopback_hosts(host) if local else None,
        execute=execute,
        static=static,
        concurrency=concurrency,
        max_streams=max_streams,
        hooks=hooks,
        lifespan=lifespan,
    )
    names = ", ".join(sorted(app.state.api.policies))
    shown = f"[{host}]" if ":" in host else host
    role = "enqueues and executes runs" if execute else "enqueues runs (workers execute them)"
    auth = "no auth (loopback only)" if no_auth else f"{len(set(tokens))} bearer token(s)"
    (say or _say)(
        f"stalwart serve: http://{shown}:{port}/ ({names}); {role}; {auth}; "
        f"OpenAPI at /openapi.json"
    )
    run(
        app,
        host=host,
        port=port,
        limits=limits,
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=3,
    )


def _say(text: str) -> None:
    print(text, flush=True)
