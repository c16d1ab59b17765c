"""`stalwart evals counterfactual`: a table or --json, the exit status a CI
gate reads, and bad flags refused naming the flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "counterfactual.py"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "evals", "counterfactual", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('evals') / 'cf.db'}"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return url


def _base(store: str, *more: str) -> list[str]:
    return [
        "--app", str(EXAMPLE), "--store", store, "--policy", "support_v2",
        "--of", "support", "--at", "2nd model step", *more,
    ]  # fmt: skip


def test_json_report_and_the_worse_gate(store: str) -> None:
    done = _cli(*_base(store, "--experiment", "gate", "--scorer", "tokens", "--json"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["experiment"], report["better"], report["worse"]) == ("gate", 20, 0)
    case = report["cases"][0]
    assert case["fork_id"] == f"{case['run_id']}.gate" and case["at"] == "2"
    assert (case["new_tokens"], case["old_tokens"]) == (68, 174)
    gated = _cli(*_base(store, "--experiment", "gate", "--scorer", "exact", "--fail-if-worse", "0"))
    assert gated.returncode == 1, gated.stderr
    assert "20 case(s): 0 better, 20 worse, 0 same" in gated.stdout
    allowed = _cli(
        *_base(store, "--experiment", "gate", "--fail-if-worse", "20", "--run", "ticket-3")
    )
    assert allowed.returncode == 0 and "1 case(s)" in allowed.stdout


def test_bad_flags_are_refused_naming_them(store: str) -> None:
    done = _cli(*_base(store, "--scorer", "fuzzy"))
    assert done.returncode == 2 and "--scorer 'fuzzy' is not one of" in done.stderr
    done = _cli("--app", str(EXAMPLE), "--store", store, "--policy", "nope", "--at", "2")
    assert done.returncode == 2 and "--policy 'nope'" in done.stderr
    done = _cli(*_base(store, "--run", "ticket-1", "--at", "9th model step"))
    assert done.returncode == 1 and "run 'ticket-1' has no '9th model step'" in done.stderr
