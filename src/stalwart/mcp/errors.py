"""The errors an MCP tool call can end in, as a model reads them.

Each is a step's recorded error (S4): the runtime hands it to the model as an
error result (``"ToolError: ..."``), and a resumed run reads it back as this
class, because the module declares them (S13) when it loads.
"""

from __future__ import annotations

import stalwart as sw

__all__ = ["McpError", "ServerUnavailable", "ToolChanged", "ToolError"]


class McpError(Exception):
    """Base of the errors of :mod:`stalwart.mcp`."""


class ToolError(McpError):
    """The server ran the tool and reported a failure (``isError``)."""


class ServerUnavailable(McpError):
    """The server could not be reached, or went away during the call.

    The next call connects again: a server that restarted is used again.
    """


class ToolChanged(McpError):
    """The server no longer offers a tool the way this run listed it.

    A run lists a server's tools once, as a recorded step, so a resumed run
    offers its model what it was offered the first time. A live call of a tool
    the server has since removed or given another input schema fails with
    this error instead of sending arguments shaped for the old schema.
    """


sw.register_type(McpError, ToolError, ServerUnavailable, ToolChanged)
