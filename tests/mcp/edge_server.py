"""An MCP server, on the SDK's low-level server API, whose tools are not plain.

- ``render`` may only run as an MCP task (``execution.taskSupport:
  "required"``): a plain call fails with -32601, as real servers answer.
- ``chart`` answers with content annotated for its audiences: a text for
  both, an image for the user only (priority 0.5), a note for the assistant
  only.
- ``echo`` is a plain tool.

It speaks the 2025-11-25 protocol only (no ``server/discover``), as the
servers on PyPI and npm that mark tools ``taskSupport`` do; a tool's
``execution`` is a field of that revision.

Every call appends the tool's name to the file in $EDGE_COUNT.
"""

import asyncio
import base64
import os
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
NONE: dict[str, Any] = {"type": "object", "properties": {}}


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="render",
                description="Render a long video (as a task only).",
                input_schema=SCHEMA,
                execution=types.ToolExecution(task_support="required"),
            ),
            types.Tool(name="chart", description="A chart, for the user.", input_schema=NONE),
            types.Tool(name="echo", description="Echo the text.", input_schema=SCHEMA),
        ]
    )


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    with open(os.environ["EDGE_COUNT"], "a") as f:
        f.write(params.name + "\n")
    if params.name == "render":
        raise MCPError(types.METHOD_NOT_FOUND, "Tool 'render' requires task augmentation")
    if params.name == "echo":
        text = str((params.arguments or {}).get("text"))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
    png = base64.b64encode(b"\x89PNG chart").decode()
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Sales rose 12%."),
            types.ImageContent(
                type="image",
                data=png,
                mime_type="image/png",
                annotations=types.Annotations(audience=["user"], priority=0.5),
            ),
            types.TextContent(
                type="text",
                text="The chart is shown to the user; do not describe it.",
                annotations=types.Annotations(audience=["assistant"]),
            ),
        ]
    )


async def main() -> None:
    server: Server[Any] = Server("edge", on_list_tools=list_tools, on_call_tool=call_tool)
    options = server.create_initialization_options()
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        # The handshake-only loop: a server of the 2025-11-25 era.
        await serve_loop(server, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    asyncio.run(main())
