"""An MCP server written with the SDK's own server API, for the client tests.

Every call appends its tool's name to the file in $CALC_COUNT, so a test
counts, on the server's side, how many times each tool really ran. ``slow``
blocks while the file $CALC_BLOCK exists (a test kills its caller meanwhile);
$CALC_VARIANT=changed serves ``add`` with another input schema.
"""

import base64
import os
import sys
import time
from pathlib import Path

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc")


def _count(name: str) -> None:
    with open(os.environ["CALC_COUNT"], "a") as f:
        f.write(name + "\n")


if os.environ.get("CALC_VARIANT") == "changed":

    @server.tool()
    def add(a: str, b: str) -> str:
        """Concatenate two strings."""
        _count("add")
        return a + b

else:

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first addend.
            b: The second addend.
        """
        _count("add")
        return a + b


@server.tool()
def slow(text: str) -> str:
    """Echo text, slowly."""
    _count("slow")
    block = os.environ.get("CALC_BLOCK")
    if block:
        Path(block + ".started").write_text(str(os.getpid()))
        while Path(block).exists():
            time.sleep(0.02)
    return text.upper()


@server.tool()
def fails(reason: str) -> str:
    """Always fails."""
    _count("fails")
    raise ToolError(f"cannot: {reason}")


@server.tool()
def rich() -> types.CallToolResult:
    """Every kind of content block."""
    _count("rich")
    png = base64.b64encode(b"\x89PNG fake").decode()
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="a picture:"),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="file:///notes.txt", mime_type="text/plain", text="the notes"
                ),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///data.bin",
                    mime_type="application/octet-stream",
                    blob=base64.b64encode(b"\x00\x01").decode(),
                ),
            ),
            types.ResourceLink(type="resource_link", uri="https://example.com/r", name="r"),
        ],
        structured_content={"ok": True},
    )


@server.tool()
def die() -> str:
    """Exit the server process mid-call."""
    _count("die")
    sys.stdout.flush()
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
