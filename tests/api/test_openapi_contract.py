"""The OpenAPI document is the contract: Schemathesis, a tool nobody on the
team wrote, generates requests from ``stalwart serve``'s own
``/openapi.json`` (valid ones, and ones the document refuses) and checks
every answer against the document, with all its checks. A real server
process on a real SQLite file, with a token and without one.

Bounds, for the suite's time (none of them turns a check off of the
server's answers): at most
:data:`EXAMPLES` generated cases per operation and per phase; a fixed seed,
so a failure is reproducible with the command it prints; the event stream
is read for at most :data:`STREAM_EVENTS` events or :data:`STREAM_SECONDS`
seconds, since the stream of a run waiting for a signal never ends by
itself (a real client stays on it). Hypothesis's ``too_slow`` health
check is off: it times the *generation* of data (the run id's pattern is a
class of every printable character), not the server, and on a busy
machine it fails a run that found nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import APP, TOKEN, serving

pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")

EXAMPLES = 8
SEED = 20261128
STREAM_EVENTS = 4
STREAM_SECONDS = 2
UI_TAG = "ui protocols"

CONFIG = "".join(
    f"""
[[operations]]
include-operation-id = "{operation}"
request-timeout = {STREAM_SECONDS}
max-stream-events = {STREAM_EVENTS}
"""
    for operation in ("stream_events", "stream_aisdk", "stream_agui", "resume_aisdk")
)


# CPython 3.11 up to 3.11.7 can raise "SystemError: AST constructor recursion
# depth mismatch" from ast.parse deep in a stack (fixed in later releases),
# and Hypothesis parses a lambda's source only to name it in a repr: naming
# each lambda plainly keeps the client off that path. What is generated and
# checked is unchanged.
PLAIN_LAMBDA_NAMES = """
import hypothesis.internal.reflection as reflection
import hypothesis.strategies._internal.lazy as lazy
def plain(f):
    return getattr(f, "__qualname__", "function")
reflection.get_pretty_function_description = plain
lazy.get_pretty_function_description = plain
from schemathesis.cli import schemathesis
schemathesis()
"""


def schemathesis(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``schemathesis`` command of this interpreter."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            PLAIN_LAMBDA_NAMES,
            "--config-file",
            str(config),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=270,
    )


@pytest.mark.timeout(330)
@pytest.mark.parametrize("auth", ["token", "no-auth"])
def test_the_server_does_what_its_openapi_document_says(
    auth: str, sqlite_url: str, tmp_path: Path
) -> None:
    _check_contract(sqlite_url, tmp_path, auth, "--exclude-tag", UI_TAG)


@pytest.mark.timeout(330)
def test_the_ui_protocol_routes_do_what_the_document_says(sqlite_url: str, tmp_path: Path) -> None:
    """The AI SDK's and AG-UI's routes (each request a conversation's turn,
    streamed to its end): a run of their own, so each run keeps to its time."""
    _check_contract(sqlite_url, tmp_path, "token", "--include-tag", UI_TAG)


def _check_contract(sqlite_url: str, tmp_path: Path, auth: str, *which: str) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    extra = ["--execute"] if auth == "token" else ["--execute", "--no-auth"]
    # contract: a policy taking a question, so the messages endpoint
    # is in the document and tested too; --execute: runs finish, and their
    # streams send steps and their end.
    with serving(sqlite_url, *extra, app=f"{APP}:contract") as srv:
        headers = ["-H", f"Authorization: Bearer {TOKEN}"] if auth == "token" else []
        done = schemathesis(
            config,
            "run",
            f"{srv.base}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(EXAMPLES),
            "--seed",
            str(SEED),
            "--generation-database",
            "none",
            "--request-timeout",
            "20",
            "--workers",
            "2",
            "--no-color",
            "--suppress-health-check",
            "too_slow",
            *which,
            *headers,
        )
    report = f"{done.stdout[-20000:]}\n{done.stderr[-5000:]}"
    assert done.returncode == 0, report
    assert "No issues found" in done.stdout or " passed" in done.stdout, report
