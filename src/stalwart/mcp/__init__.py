"""MCP both ways: any MCP server's tools as options, any policy as an MCP tool.

    from stalwart import mcp

    async with mcp.connect(["python", "server.py"]) as tools:      # stdio
        actions = await ctx.call(model, observations=history, options=tools)

    async with mcp.connect("https://example.com/mcp", headers={"Authorization": "Bearer …"}):
        ...

    await mcp.serve([search, summarize], store="sqlite:///tools.db")          # stdio
    await mcp.serve(myapp, http="127.0.0.1:8000", store="sqlite:///tools.db")  # HTTP

Built on the official ``mcp`` SDK (the ``stalwart[mcp]`` extra). The client
sits with the agents (its tools are options like any policy); the server is an
edge, a front for a :class:`~stalwart.Runner`. Nothing below the agents layer
imports this package. See ``docs/mcp.md``.
"""

from __future__ import annotations

from ..core.errors import McpError, ServerUnavailable, ToolChanged, ToolError
from .asks import ELICITATION, Log
from .connection import Progress
from .content import message_of, result_of
from .server import (
    IDEMPOTENCY_KEY,
    WAITING,
    Resource,
    build_server,
    exposed,
    parse_http,
    request_run_id,
    serve,
    tool,
)
from .toolbox import McpTool, Toolbox, connect

__all__ = [
    "ELICITATION",
    "IDEMPOTENCY_KEY",
    "WAITING",
    "Log",
    "McpError",
    "McpTool",
    "Progress",
    "Resource",
    "ServerUnavailable",
    "ToolChanged",
    "ToolError",
    "Toolbox",
    "build_server",
    "connect",
    "exposed",
    "message_of",
    "parse_http",
    "request_run_id",
    "result_of",
    "serve",
    "tool",
]
