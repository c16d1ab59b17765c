"""How the CLI tests run a command: in-process through typer's CliRunner
(``invoke``, ``ok``), or as the real command in a fresh interpreter whose
stdout is a pipe (``run_cli``); and the fields every listed run has
(``RUN_FIELDS``, docs/cli.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner, Result

from stalwart.cli.app import app

# In-process: wide enough that no line wraps, no colour, and no store from
# the environment of whoever runs the tests.
ENV = {"COLUMNS": "250", "STALWART_STORE": None, "NO_COLOR": "1", "FORCE_COLOR": None}

# The fields a run has wherever it is listed (runs list, runs waiting, runs show).
RUN_FIELDS = {
    "id",
    "policy",
    "status",
    "queue",
    "priority",
    "parent_id",
    "created_at",
    "updated_at",
    "code_version",
    "stranded",
    "waiting_for",
    "wake_at",
    "owner",
    "lease_expires_at",
    "cancel_requested",
    "tags",
}


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    """``stalwart ARGS`` in this process (``ENV``, with ``env`` over it)."""
    return CliRunner(env={**ENV, **(env or {})}).invoke(app, list(args))


def ok(*args: str) -> str:
    """The stdout of ``stalwart ARGS``, which must succeed."""
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


def run_cli(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m stalwart ARGS`` in a fresh interpreter from ``cwd``, its
    stdout and stderr pipes and its stdin closed: no colour, and neither
    ``FORCE_COLOR``, ``STALWART_STORE`` nor ``COLUMNS`` from this process;
    ``env`` adds to that. A command still running after 60 s fails the test."""
    clean = {**os.environ, "NO_COLOR": "1"}
    for name in ("FORCE_COLOR", "STALWART_STORE", "COLUMNS"):
        clean.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "stalwart", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
