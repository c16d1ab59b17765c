"""``stalwart runs show``: a run's inputs by parameter name when ``--app``
gives its policy (the ledger records them by position, whichever way they
were passed), as recorded without it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import stalwart as sw

from . import _agents

ROOT = Path(__file__).resolve().parents[2]


def show(*args: str) -> str:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("STALWART_STORE", None)
    done = subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "runs", "show", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_runs_show_names_inputs_given_by_keyword_when_app_gives_the_policy(
    sqlite_url: str,
) -> None:
    async def seed() -> None:
        async with sw.Runner(sqlite_url, policies=[_agents.add]) as r:
            assert await r.run(_agents.add, a=2, b=40, run_id="add-1") == 42

    asyncio.run(seed())
    named = show("add-1", "--store", sqlite_url, "--app", "tests.cli._agents")
    assert "a=2, b=40" in named
    recorded = show("add-1", "--store", sqlite_url)
    assert "2, 40" in recorded and "a=2" not in recorded
