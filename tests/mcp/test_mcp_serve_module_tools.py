"""``stalwart mcp serve`` on a module with both kinds of marks (PocketJoe's
and ``@stalwart.mcp.tool``): a mistake in the ``@stalwart.mcp.tool`` ones
is an error naming the module and the tool, not a tool quietly left out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("mcp")

from stalwart import mcp
from stalwart.cli.app import app

BOTH = """
import stalwart as sw
from stalwart import mcp
from stalwart.pocketjoe.v02 import policy


@policy.tool(description="Adds two integers")
async def add(a: int, b: int = 1) -> int:
    return a + b


@mcp.tool(name="lookup")
@sw.policy
async def find(q: str) -> str:
    return q


@mcp.tool(name="lookup")
@sw.policy
async def search(q: str) -> str:
    return q
"""


def _module(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def test_a_clash_among_the_module_s_own_tools_is_an_error_naming_module_and_tool(
    tmp_path: Path,
) -> None:
    path = _module(tmp_path, "both_marks_app", BOTH)
    try:
        out = CliRunner().invoke(app, ["mcp", "serve", "--app", str(path)], input="")
    finally:
        sys.modules.pop("both_marks_app", None)
    assert out.exit_code == 2, out.output
    assert "both_marks_app" in out.output and "'lookup'" in out.output


def test_exposed_names_the_module_and_the_tool(tmp_path: Path) -> None:
    import importlib.util

    path = _module(tmp_path, "clash_app", BOTH)
    spec = importlib.util.spec_from_file_location("clash_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(ValueError, match=r"module clash_app.*'lookup'"):
        mcp.exposed(module)
    # A module without any @stalwart.mcp.tool mark may be asked for none.
    plain = importlib.util.module_from_spec(spec)
    assert mcp.exposed(plain, required=False) == {}
    with pytest.raises(ValueError, match="no policy marked"):
        mcp.exposed(plain)
