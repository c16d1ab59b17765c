"""One check of a server's access tokens, for the API and the inspector
alike (``stalwart.http.access.check_tokens``): a token too short to resist
guessing, or one with spaces, is refused before anything is served, with
the same words, naming the option it came from and never the token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import stalwart as sw
from stalwart.cli.app import app
from stalwart.http.access import MIN_TOKEN, check_tokens
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
def test_ui_refuses_a_weak_token_naming_the_option(sqlite_url: str, token: str, why: str) -> None:
    store = sqlite_url
    line = _error_line(_invoke("ui", "--store", store, "--port", "1", "--token", token))
    assert line.startswith("error: ui: the token given with --token ")
    assert why in line
    assert token not in line


def test_ui_and_serve_give_the_same_reason(sqlite_url: str) -> None:
    store = sqlite_url
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


# The token rules themselves: unicode spaces, control and format characters,
# the environment variable, and what an error shows.


@sw.policy
async def st_echo(**kwargs: Any) -> str:
    """Echoes its keywords.

    Args:
        kwargs: Anything.
    """
    return repr(sorted(kwargs))


GOOD = "k" * MIN_TOKEN


@pytest.mark.parametrize(
    "bad",
    [
        GOOD + "\u00a0",  # no-break space
        GOOD[:8] + "\u2003" + GOOD[8:],  # em space
        GOOD + "\u3000",  # ideographic space
        GOOD + "\u200b",  # zero width space (a format character)
        GOOD + "\ufeff",  # byte order mark
        GOOD + "\u2028",  # line separator
        GOOD + "\x1b[2J",  # an escape sequence for a terminal
        GOOD + "\r\nX-Injected: 1",
        GOOD + "\x00",
    ],
)
def test_invisible_and_control_characters_are_refused_without_echo(bad: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_tokens([bad], "--token")
    text = str(caught.value)
    assert "contains spaces or control characters" in text
    assert GOOD not in text and bad not in text


def test_a_short_token_error_counts_and_never_shows_it() -> None:
    secret = "s3cr3t-Tok"
    with pytest.raises(ValueError) as caught:
        check_tokens([GOOD, secret], "tokens=")
    text = str(caught.value)
    assert text.startswith("token #2 of tokens= has 10 characters")
    assert secret not in text and GOOD not in text


def test_a_token_no_http_client_can_send_is_refused_at_start() -> None:
    with pytest.raises(ValueError):
        check_tokens(["é" * MIN_TOKEN], "--token")


def test_the_api_refuses_to_start_with_a_token_no_client_can_send(sqlite_url: str) -> None:
    """An HTTP header carries bytes read as latin-1: a client's UTF-8 'é'
    arrives as two other characters, so such a token could never match."""
    from stalwart.api import create_app

    with pytest.raises(ValueError, match="other than ASCII"):
        create_app(sqlite_url, [st_echo], tokens=["é" * MIN_TOKEN])


def test_the_environment_variable_is_checked_and_never_echoed(sqlite_url: str) -> None:
    from stalwart.cli.app import app

    secret = "envTok1"
    env = {"STALWART_API_TOKENS": f" {GOOD} ,{secret},", "STALWART_STORE": None, "NO_COLOR": "1"}
    result = CliRunner(env=env).invoke(
        app,
        [
            "serve",
            "--app",
            "tests.cli.test_token_check:st_echo",
            "--store",
            sqlite_url,
            "--port",
            "1",
        ],
    )
    assert result.exit_code == 2, result.output
    out = result.output + (result.stderr or "")
    assert "token #2 of --token or $STALWART_API_TOKENS has 7 characters" in out
    assert secret not in out and GOOD not in out


def test_one_token_given_as_a_string_is_named_as_the_mistake() -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        check_tokens("a-perfectly-long-token-of-32-chars", "tokens=")
    assert "has 1 characters" not in str(caught.value)
