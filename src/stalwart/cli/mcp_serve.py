"""``stalwart mcp serve``: an app's policies as MCP tools (:mod:`stalwart.mcp`)."""

from __future__ import annotations

from types import ModuleType
from typing import Annotated, Any

import typer

from ..core.errors import CLIError
from .apps import load_app
from .command import execute, fail

__all__ = ["mcp_serve"]


def mcp_serve(
    app_spec: Annotated[
        str,
        typer.Option(
            "--app",
            metavar="MODULE",
            help="module (its policies marked @stalwart.mcp.tool, or PocketJoe's "
            "@policy_spec_mcp_tool / @policy.tool / @policy.resource) or module:attr "
            "(a policy, a list of them, a dict of tool name to policy, or a PocketJoe "
            "context class)",
        ),
    ],
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="serve streamable HTTP at HOST:PORT (endpoint /mcp); default stdio",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            "-s",
            envvar="STALWART_STORE",
            metavar="URL",
            help="store URL: each tool call a durable run (default: in memory)",
        ),
    ] = None,
) -> None:
    """Serve policies as MCP tools over stdio, or over HTTP with --http."""
    from .. import mcp

    try:
        target = load_app(app_spec)
    except CLIError as exc:  # an app that cannot be imported: one line, exit 1
        fail(str(exc), exc.code)

    async def go() -> None:
        try:
            # Made in the loop: a PocketJoe context it makes is then seen by every run.
            tools, resources = _pocketjoe(target)
            app = tools if tools or resources else target
            await mcp.serve(app, store=store, http=http, resources=resources)
        except ValueError as exc:  # no policy to serve, a bad tool name or --http
            raise CLIError(f"mcp serve: {exc}", code=2) from None

    execute(go)


def _pocketjoe(target: Any) -> tuple[dict[str, Any], list[Any]]:
    """The tools and resources PocketJoe's marks (``@policy_spec_mcp_tool``,
    ``@policy.tool``, ``@policy.resource``) put in ``target``, with the
    module's own ``@stalwart.mcp.tool`` policies beside them; nothing when
    it has no PocketJoe mark (``mcp.serve`` then reads ``target`` itself).

    The wiring is here because :mod:`stalwart.mcp` and
    :mod:`stalwart.pocketjoe` are one layer and know nothing of each other.
    """
    from .. import mcp
    from ..pocketjoe.policy_spec_mcp import served_policies

    tools, found = served_policies(target)
    if not tools and not found:
        return {}, []
    if isinstance(target, ModuleType):
        # No @stalwart.mcp.tool policy: PocketJoe's alone; any other mistake
        # in the module's own marks is an error naming the module and tool.
        own = mcp.exposed(target, required=False)
        for name, pol in own.items():
            if name in tools:
                raise ValueError(
                    f"module {target.__name__}: two policies would be served as the tool "
                    f"{name!r} (a PocketJoe mark and @stalwart.mcp.tool)"
                )
            tools[name] = pol
    resources = [mcp.Resource(r.uri, r.policy, r.name, r.description, r.mime_type) for r in found]
    return tools, resources
