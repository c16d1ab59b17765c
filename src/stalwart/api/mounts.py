"""Apps to mount in a larger site: :func:`agui_app`, one agent answering
AG-UI's ``RunAgentInput`` at its root (the ``agui`` extra)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..conversations import conversation_policies
from ..core.policy import as_policy
from ..http.access import LOOPBACK_NAMES
from ..stores import Store
from .agui import run_agent
from .app import create_app

__all__ = ["agui_app"]


def agui_app(
    store: str | Store,
    agent: Any,
    *,
    tokens: Sequence[str] = (),
    hosts: Collection[str] | None = tuple(sorted(LOOPBACK_NAMES)),
    execute: bool = False,
    poll: float = 0.5,
) -> Starlette:
    """An app that answers AG-UI's ``RunAgentInput`` at ``POST /`` with
    conversations with ``agent`` (an ``llm.Agent``, or any policy taking
    ``question``), beside the whole API (:func:`~stalwart.api.create_app`):
    mount it where a front end expects an AG-UI endpoint
    (``Mount("/agent", agui_app(...))``)."""
    name = as_policy(agent).name
    app = create_app(
        store,
        [agent, *conversation_policies(agent)],
        tokens=tokens,
        hosts=hosts,
        execute=execute,
        poll=poll,
    )

    async def root(request: Request) -> Response:
        return await run_agent(request, name)

    app.router.routes.insert(0, Route("/", root, methods=["POST"]))
    return app
