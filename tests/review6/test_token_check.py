"""One check of a server's access tokens, for the API and the inspector
alike (``stalwart.core.access.check_tokens``): a token too short to resist
guessing, or one with spaces, is refused before anything is served, with
the same words, naming the option it came from and never the token."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from stalwart.cli.app import app
from stalwart.web import create_app

SHORT = "tiny-tok"  # 8 characters
SPACED = "a token with spaces in it"
WHY_SHORT = "has 8 characters; a token has at least 16"


def _invoke(*args: str) -> Result:
    env = {"STALWART_API_TOKENS": "", "STALWART_STORE": None, "COLUMNS": "250", "NO_COLOR": "1"}
    return CliRunner(env=env).invoke(app, list(args))


def _error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("token", "why"), [(SHORT, WHY_SHORT), (SPACED, "contains spaces or control characters")]
)
def test_ui_refuses_a_weak_token_naming_the_option(tmp_path: Path, token: str, why: str) -> None:
    store = f"sqlite:///{tmp_path / 'ui.db'}"
    line = _error_line(_invoke("ui", "--store", store, "--port", "1", "--token", token))
    assert line.startswith("error: ui: the token given with --token ")
    assert why in line
    assert token not in line


def test_ui_and_serve_give_the_same_reason(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'both.db'}"
    ui = _error_line(_invoke("ui", "--store", store, "--port", "1", "--token", SHORT))
    serve = _error_line(
        _invoke(
            "serve", "--app", "tests/api/api_app.py:policies", "--store", store, "--token", SHORT
        )
    )
    make = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    reason = f"{WHY_SHORT} (make one with: {make})"
    assert ui == f"error: ui: the token given with --token {reason}"
    assert serve == f"error: serve: the token given with --token or $STALWART_API_TOKENS {reason}"


def test_the_inspector_app_refuses_a_weak_token(tmp_path: Path) -> None:
    """A program that builds the inspector itself gets the same check."""
    with pytest.raises(ValueError, match=f"^the token given with token= {WHY_SHORT}"):
        create_app(f"sqlite:///{tmp_path / 'app.db'}", token=SHORT)
    create_app(f"sqlite:///{tmp_path / 'app.db'}", token="a-long-enough-token")
