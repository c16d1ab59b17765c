"""An MCP server on the Python SDK's MCPServer (formerly FastMCP) whose tool
asks its client: the client's model for a summary (sampling), then the user
whether to publish it (elicitation), logging as it goes. It also serves a
resource and a prompt.

Every call of ``publish`` appends a line to the file in $ASKING_COUNT.
"""

import os
from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
    Sample,
)
from pydantic import BaseModel

server = MCPServer("asking")


class Approval(BaseModel):
    approve: bool
    note: str = ""


def summary(topic: str) -> Sample:
    """Ask the client's model for a one-line summary of ``topic``."""
    ask = types.TextContent(type="text", text=f"Summarize {topic}.")
    return Sample(
        [types.SamplingMessage(role="user", content=ask)],
        system_prompt="You write one-line summaries.",
        max_tokens=60,
    )


def approval(topic: str) -> Elicit[Approval]:
    """Ask the user whether to publish."""
    return Elicit(f"Publish the summary of {topic}?", Approval)


@server.tool()
async def publish(
    topic: str,
    sampled: Annotated[types.CreateMessageResult, Resolve(summary)],
    answer: Annotated[ElicitationResult[Approval], Resolve(approval)],
) -> str:
    """Summarize ``topic`` with the client's model, then ask the user to approve."""
    with open(os.environ["ASKING_COUNT"], "a") as f:
        f.write("publish\n")
    assert isinstance(sampled.content, types.TextContent)
    text = sampled.content.text
    if not isinstance(answer, AcceptedElicitation) or not answer.data.approve:
        return f"not published ({answer.action}): {text}"
    return f"published: {text} {answer.data.note}".strip()


@server.tool()
async def chatty(ctx: Context) -> str:
    """Log twice, then answer."""
    await ctx.info("starting")
    await ctx.warning("almost done")
    return "done"


@server.resource("notes://today", mime_type="text/plain")
def today() -> str:
    """Today's notes."""
    return "Ship the MCP client."


@server.prompt()
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic}."


if __name__ == "__main__":
    server.run()
