"""`stalwart evals dataset create|list|export|import` and `stalwart evals
run`: datasets drawn from a store's runs, moved through a JSON Lines file,
run as an experiment whose JSON report and exit status a CI gate reads;
bad input refused naming what and where."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "experiments.py"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "evals", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('datasets') / 'ex.db'}"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return url


def test_create_list_export_import(store: str, tmp_path: Path) -> None:
    made = _cli("dataset", "create", "chats", "--of", "support", "--tag", "channel=chat",
                "--store", store, "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["dataset"] == {"name": "chats", "version": 1, "cases": 5}
    again = _cli("dataset", "create", "chats", "--of", "support", "--tag", "channel=chat",
                 "--store", store)  # fmt: skip
    assert "dataset chats v1: 5 case(s)" in again.stdout  # the same cases: no new version

    listed = json.loads(_cli("dataset", "list", "--store", store, "--json").stdout)
    assert [(d["name"], d["version"], d["cases"]) for d in listed["datasets"]] == [
        ("chats", 1, 5),
        ("tickets", 1, 50),
    ]
    table = _cli("dataset", "list", "--store", store).stdout
    assert "tickets" in table and "e-mail tickets" in table

    path = tmp_path / "tickets.jsonl"
    out = _cli("dataset", "export", "tickets", "--out", str(path), "--store", store)
    assert out.returncode == 0, out.stderr
    lines = path.read_text().splitlines()
    assert len(lines) == 51 and json.loads(lines[1])["source"] == "ticket-0"
    assert _cli("dataset", "export", "tickets", "--store", store).stdout == path.read_text()

    imported = _cli("dataset", "import", str(path), "--name", "copy", "--store", store, "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["dataset"] == {"name": "copy", "version": 1, "cases": 50}


def test_run_reports_json_and_gates_on_worse_and_pass_rate(store: str) -> None:
    base = ["run", "--app", str(EXAMPLE), "--store", store, "--dataset", "tickets"]
    done = _cli(*base, "--policy", "support_b", "--experiment", "cli-b", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["experiment"], report["policy"]) == ("cli-b", "support_b")
    assert report["cases_total"] == 50
    assert (report["same"], report["pass_rate"]) == (50, 1.0)
    assert report["cases"][0]["case"] == "ticket-0" and report["cases"][0]["passed"]

    # prompt A changes every answer: `exact` calls that worse, and the gate closes.
    gated = _cli(*base, "--policy", "support_a", "--experiment", "cli-a", "--min-pass", "0.9")
    assert gated.returncode == 1, gated.stderr
    assert "50 case(s), 0 better, 50 worse, 0 same, 0% passed" in gated.stdout
    allowed = _cli(*base, "--policy", "support_a", "--experiment", "cli-a",
                   "--fail-if-worse", "50")  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr


def test_bad_input_is_refused_naming_it(store: str, tmp_path: Path) -> None:
    base = ["run", "--app", str(EXAMPLE), "--store", store]
    done = _cli(*base, "--dataset", "nope", "--policy", "support_a", "--experiment", "x")
    assert done.returncode == 1 and "dataset 'nope' has no any version" in done.stderr
    done = _cli(*base, "--dataset", "tickets", "--policy", "nope", "--experiment", "x")
    assert done.returncode == 2 and "--policy 'nope'" in done.stderr
    done = _cli(*base, "--dataset", "tickets", "--policy", "support_a", "--experiment", "a b")
    assert done.returncode == 2 and "experiment name 'a b'" in done.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"dataset": "bad"}\n{"id": "x", "status": "great"}\n')
    done = _cli("dataset", "import", str(bad), "--store", store)
    assert done.returncode == 2 and "line 2: case 'x': field 'status'" in done.stderr
    done = _cli("dataset", "create", "none", "--of", "nobody", "--store", store)
    assert done.returncode == 1 and "no recorded run of 'nobody' matches" in done.stderr
    done = _cli("dataset", "export", "tickets", "--version", "9", "--store", store)
    assert done.returncode == 1 and "dataset 'tickets' has no version 9" in done.stderr
