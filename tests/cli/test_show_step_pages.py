"""``stalwart runs show`` prints a page of a long run's steps, never all.

A run of hundreds of steps is shown by its latest ``--limit`` steps (50
unless told), with how many were left out and the ``--before`` cursor that
shows the ones before; following the cursors shows every step once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from stalwart.cli.app import app
from stalwart.core.ledger import RunRecord, StoredStep
from stalwart.core.stepargs import step_hash
from stalwart.stores.base import this_host
from stalwart.stores.sqlite import SQLiteStore

ENV = {"COLUMNS": "250", "STALWART_STORE": None, "NO_COLOR": "1"}
START = 1_700_000_000.0
STEPS = 230


def _seed(url: str) -> None:
    async def go() -> None:
        store = SQLiteStore.from_url(url)
        await store.open()
        try:
            await store.create_run(RunRecord("long", "loop", "{}"))
            claim = await store.claim("long", f"{this_host()}:{os.getpid()}:cli", 60.0)
            assert claim is not None
            for i in range(1, STEPS + 1):
                step = StoredStep(
                    str(i),
                    "tick",
                    step_hash("{}"),
                    "{}",
                    json.dumps(i),
                    None,
                    1,
                    START + i,
                    START + i,
                )
                await store.record_step("long", claim.fence, step)
        finally:
            await store.close()

    asyncio.run(go())


def _show(*args: str) -> str:
    result = CliRunner(env=ENV).invoke(app, ["runs", "show", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_show_prints_the_latest_page_and_says_how_many_earlier_steps_it_left_out(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'long.db'}"
    _seed(db)
    out = _show("long", "--store", db)
    assert "recorded steps 181-230 of 230" in out
    keys = re.findall(r"(\d+)  tick\(\)", out, re.MULTILINE)
    assert keys == [str(i) for i in range(181, 231)]
    assert "180 earlier steps left out: --before" in out

    ten = _show("long", "--limit", "10", "--store", db)
    assert re.findall(r"(\d+)  tick\(\)", ten, re.MULTILINE) == [str(i) for i in range(221, 231)]
    assert "220 earlier steps left out" in ten


def test_following_the_cursors_shows_every_step_once(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'long.db'}"
    _seed(db)
    seen: list[int] = []
    args = ["long", "--limit", "100", "--json", "--store", db]
    while True:
        doc = json.loads(_show(*args))
        assert doc["step_count"] == STEPS and len(doc["steps"]) <= 100
        assert doc["earlier"] + len(doc["steps"]) + doc["later"] == STEPS
        seen = [int(s["key"]) for s in doc["steps"]] + seen
        if doc["next"] is None:
            assert doc["earlier"] == 0
            break
        args = ["long", "--limit", "100", "--before", doc["next"], "--json", "--store", db]
    assert seen == list(range(1, STEPS + 1))
    # The cursor the text prints is the same, quoted for a shell.
    text = _show("long", "--limit", "100", "--store", db)
    printed = re.search(r"--before (\S+)", text)
    assert printed is not None
    first = json.loads(_show("long", "--limit", "100", "--json", "--store", db))["next"]
    assert shlex.split(printed.group(1)) == [first]
