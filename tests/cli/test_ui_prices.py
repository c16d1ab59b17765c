"""``stalwart ui --prices FILE``: the price table ``worker --prices`` reads,
handed to the inspector, or refused before anything is served with an
error naming the file and what in it is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import stalwart.web
from stalwart.cli.app import app
from stalwart.llm import Price


def _invoke(*args: str) -> Result:
    env = {"STALWART_API_TOKENS": "", "STALWART_STORE": None, "COLUMNS": "250", "NO_COLOR": "1"}
    return CliRunner(env=env).invoke(app, list(args))


def test_the_table_reaches_the_inspector(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: dict[str, Any] = {}
    monkeypatch.setattr(stalwart.web, "serve", lambda *a, **kw: given.update(kw))
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"gpt-4.1-mini": {"input": 0.4, "output": 1.6}}))
    result = _invoke("ui", "--store", sqlite_url, "--prices", str(table))
    assert result.exit_code == 0, result.output
    assert given["prices"] == {"gpt-4.1-mini": Price(0.4, 1.6)}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"m": {"input": 1}}', "['m']: expected {'input': N, 'output': N}"),
        ('{"m": {"input": -1, "output": 1}}', "['m']: Price.input: expected a finite number >= 0"),
        ("{not json", "not JSON"),
    ],
)
def test_a_bad_table_is_refused_naming_the_file_and_the_fault(
    sqlite_url: str, tmp_path: Path, text: str, says: str
) -> None:
    table = tmp_path / "prices.json"
    table.write_text(text)
    result = _invoke("ui", "--store", sqlite_url, "--port", "1", "--prices", str(table))
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith(f"error: ui: --prices {table}"), line
    assert says in line
    assert "Traceback" not in result.output
