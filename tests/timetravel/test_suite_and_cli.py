"""The example regression suite, the pytest plugin, and the CLI commands, in
real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pytest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_the_example_suite_passes_and_a_deliberate_change_names_the_step() -> None:
    ok = _pytest("examples/replay_suite")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("..")  # two recordings, two passes
    bad = _pytest("examples/replay_suite", env={"STALWART_DELIBERATE_CHANGE": "1"})
    assert bad.returncode == 1
    assert "DIVERGES at step 1" in bad.stdout
    assert "first difference at ['options'][0]" in bad.stdout


def test_the_plugin_marker_parametrizes_a_folder(tmp_path: Path) -> None:
    recordings = ROOT / "examples/replay_suite/recordings"
    test = tmp_path / "test_marked.py"
    test.write_text(
        "import pytest\n"
        "from stalwart.demo.agent import research\n"
        "from stalwart.testing import replay\n"
        f"@pytest.mark.stalwart_recordings({str(recordings)!r})\n"
        "def test_it(recording):\n"
        "    replay(recording, research).check()\n"
    )
    done = _pytest(str(test), "-p", "stalwart.testing.pytest_plugin", "--rootdir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("..")


@pytest.fixture
def cli_app(tmp_path: Path) -> str:
    """A CLI with the time-travel commands registered (cli/app.py is not ours)."""
    script = tmp_path / "tt_cli.py"
    script.write_text(
        "import typer\n"
        "from stalwart.cli.export import export_run, import_run\n"
        "from stalwart.cli.fork import fork_run\n"
        "app = typer.Typer()\n"
        "app.command('export')(export_run)\n"
        "app.command('import')(import_run)\n"
        "app.command('fork')(fork_run)\n"
        "app()\n"
    )
    return str(script)


def test_cli_export_import_and_fork(tmp_path: Path, cli_app: str) -> None:
    src = f"sqlite:///{tmp_path / 'a.db'}"
    dst = f"sqlite:///{tmp_path / 'b.db'}"

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, cli_app, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            input=stdin,
        )

    imported = run(
        "import", str(ROOT / "examples/replay_suite/recordings/walrus.jsonl"), "--store", src
    )
    assert imported.returncode == 0, imported.stderr
    assert "imported 1 of 1" in imported.stdout
    exported = run("export", "walrus", "--store", src)
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()
    assert json.loads(lines[0])["format"] == "stalwart.runs"
    assert run("import", "-", "--store", dst, stdin=exported.stdout).returncode == 0
    forked = run(
        "fork",
        "walrus",
        "--app",
        "stalwart.demo.agent",
        "--at",
        "5",
        "--result",
        '[{"$t":"msg","v":{"role":"assistant","actor":"model",'
        '"parts":[{"type":"text","text":"Edited answer."}]}}]',
        "--new-run-id",
        "walrus-b",
        "--store",
        dst,
    )
    assert forked.returncode == 0, forked.stdout + forked.stderr
    assert "walrus-b" in forked.stdout and "succeeded" in forked.stdout
    again = run("export", "walrus-b", "--store", dst)
    result = json.loads(again.stdout.splitlines()[1])["run"]["result"]
    assert json.loads(result) == "Edited answer."
    assert run("export", "nope", "--store", dst).returncode == 1
