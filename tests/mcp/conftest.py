"""The MCP servers the client tests talk to, as real processes: MCP's own
reference server (``@modelcontextprotocol/server-everything``, from npm) and
a server on the Python SDK's ``MCPServer`` (``asking_server.py``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tests.npm import npm_dir

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def everything() -> list[str]:
    """The command that starts the reference server over stdio."""
    js = npm_dir(HERE / "js")
    entry = js / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
    return ["node", str(entry / "index.js"), "stdio"]


@pytest.fixture
def asking(tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    """The MCPServer that samples, elicits and logs: its command, its
    environment, and the file that counts its tool's executions."""
    count = tmp_path / "asking-count"
    env = {"PATH": os.environ["PATH"], "ASKING_COUNT": str(count)}
    return [sys.executable, str(HERE / "asking_server.py")], env, count
