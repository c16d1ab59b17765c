"""``stalwart mcp serve``: an app's policies as MCP tools (:mod:`stalwart.mcp`)."""

from __future__ import annotations

from typing import Annotated

import typer

from .apps import load_app
from .command import CLIError, execute

__all__ = ["mcp_serve"]


def mcp_serve(
    app_spec: Annotated[
        str,
        typer.Option(
            "--app",
            help="module (its policies marked @stalwart.mcp.tool) or module:attr "
            "(a policy, a list of them, or a dict of tool name to policy)",
        ),
    ],
    http: Annotated[
        str | None,
        typer.Option(
            "--http", help="serve streamable HTTP at HOST:PORT (endpoint /mcp); default stdio"
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            "-s",
            envvar="STALWART_STORE",
            help="store URL: each tool call a durable run (default: in memory)",
        ),
    ] = None,
) -> None:
    """Serve policies as MCP tools over stdio, or over HTTP with --http."""
    from .. import mcp

    target = load_app(app_spec)

    async def go() -> None:
        try:
            await mcp.serve(target, store=store, http=http)
        except ValueError as exc:  # no policy to serve, a bad tool name or --http
            raise CLIError(f"mcp serve: {exc}", code=2) from None

    execute(go)
