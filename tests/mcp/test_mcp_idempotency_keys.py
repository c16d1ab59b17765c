"""The MCP server's client-supplied idempotency key, from two clients.

The key names a run store-wide (``mcp-<tool>-key-<key>``), not per client:
a second client that happens to pick the same key with other arguments is
refused with an InputMismatchError whose text quotes the first client's
stored arguments, and the server hands that text back to the second client.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pytest
from tests.mcp.serving import served_mcp

from stalwart.mcp.server import IDEMPOTENCY_KEY, request_run_id

pytestmark = pytest.mark.timeout(90)


def _key(key: str) -> Any:
    """The request's ``_meta`` naming it for retries (the SDK's TypedDict
    declares only its own keys; extra ones pass through)."""
    return cast(Any, {IDEMPOTENCY_KEY: key})


async def test_a_reused_key_does_not_show_another_clients_arguments(
    tmp_path: Path, sqlite_url: str
) -> None:
    env = {**os.environ, "APP_COUNT": str(tmp_path / "count"), "APP_BLOCK": str(tmp_path / "b")}
    async with served_mcp("stdio", sqlite_url, env) as alice:
        first = await alice.call_tool("add", {"a": 424242, "b": 1}, meta=_key("k1"))
        assert not first.is_error
    async with served_mcp("stdio", sqlite_url, env) as bob:
        second = await bob.call_tool("add", {"a": 1}, meta=_key("k1"))
    text = " ".join(getattr(c, "text", "") for c in second.content)
    assert second.is_error
    assert "424242" not in text, f"bob reads alice's arguments: {text!r}"


def test_two_tools_keys_never_name_one_run() -> None:
    """``report`` with key ``x-key-1`` and ``report-key-x`` with key ``1``
    both become ``mcp-report-key-x-key-1``: the second tool's call is then
    refused as a run of another policy."""
    a = request_run_id("report", {}, {IDEMPOTENCY_KEY: "x-key-1"})
    b = request_run_id("report-key-x", {}, {IDEMPOTENCY_KEY: "1"})
    assert a != b
