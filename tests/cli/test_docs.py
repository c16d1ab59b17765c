"""docs/cli.md: its example application and every command it shows, run for real.

The example app is the page's Python block; the runs it describes are
started with a Runner; each ``$ stalwart ...`` line runs as a subprocess
(stdout a pipe), in order, and must succeed. ``--json`` output must parse.
The worker line runs forever, so tests/cli/test_logs.py runs it instead.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import stalwart as sw

DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def test_every_command_in_the_cli_docs_runs(tmp_path: Path, sqlite_url: str) -> None:
    text = DOC.read_text()
    app_src = re.search(r"```python\n(.*?)```", text, re.S)
    assert app_src is not None
    (tmp_path / "shop.py").write_text(app_src.group(1))
    (tmp_path / "examples").symlink_to(DOC.parents[1] / "examples")  # what `stalwart run` runs
    spec = importlib.util.spec_from_file_location("shop", tmp_path / "shop.py")
    assert spec is not None and spec.loader is not None
    shop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shop)
    url = sqlite_url

    async def make() -> None:
        async with sw.Runner(url) as runner:
            await runner.start(shop.refund, "A-42", 120, run_id="refund-42")
            await runner.start(shop.refund, "A-43", 80, run_id="refund-43")
            await runner.start(shop.refund, "A-44", 60, run_id="refund-44")  # moved away
            await runner.start(shop.survey, "Ada", run_id="survey-1")
            for _ in range(500):
                ids = ("refund-42", "refund-43", "refund-44", "survey-1")
                runs = [await runner.get_run(i) for i in ids]
                if all(r.status == "suspended" for r in runs):
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("the example runs did not suspend")

    asyncio.run(make())
    blocks = re.findall(r"```console\n(.*?)```", text, re.S)
    commands = [line[2:] for b in blocks for line in b.splitlines() if line.startswith("$ ")]
    assert len(commands) >= 12
    env = {**os.environ, "STALWART_STORE": url, "NO_COLOR": "1"}
    outputs: dict[str, str] = {}
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "stalwart"
        if argv[1] == "worker":
            continue
        done = subprocess.run(
            [sys.executable, "-m", "stalwart.cli", *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        outputs[command] = done.stdout
        if "--json" in argv:
            json.loads(done.stdout)
    waiting = json.loads(outputs["stalwart runs waiting --json"])["runs"]
    assert [r["id"] for r in waiting] == ["refund-42", "refund-43", "refund-44", "survey-1"]
    assert waiting[0]["about"] == {"order": "A-42", "amount": 120}
    assert waiting[3]["prompt"] == "How was your order, Ada?"
    assert json.loads(outputs["stalwart runs count --json"])["by_status"]["suspended"] == 4
    assert "succeeded: refunded" in outputs["stalwart runs resume refund-42 --app shop.py"]
    assert "cancelled run refund-43" in outputs["stalwart runs cancel refund-43"]
    moved = outputs["stalwart runs move refund-44 --to sqlite:///elsewhere.db"]
    assert moved.startswith("moved refund-44 to sqlite:///elsewhere.db: 1 run(s)")
    assert "nothing blocks the deploy" in outputs["stalwart deploy check --app shop.py"]
    checked = json.loads(outputs["stalwart deploy check --app shop.py --json"])
    assert checked["ok"] is True and checked["counts"]["compatible"] == len(checked["runs"]) >= 2
    essay = outputs['stalwart run examples/pocketflow_program/essay.py "durable agents"']
    assert essay.startswith("# Durable agents\n")
