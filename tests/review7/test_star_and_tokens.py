"""Attacks on commit 787d111: the one token rule, and '*' keywords refused alike.

A keyword argument named '*' collides with the ledger's name for positional
arguments, so it is refused; the commit made memory runs refuse it too (a
program that works in memory must not fail the day it gets a store). Here it
arrives by the other doors: a bound attribute of an application context, and
a model's tool call, whose arguments the runtime validates and passes on.
Tokens: unicode spaces, control and format characters, the environment
variable, and what an error shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import stalwart as sw
from stalwart import Message
from stalwart.core.access import MIN_TOKEN, check_tokens
from stalwart.testing import ScriptedLLM


@sw.policy
async def st_echo(**kwargs: Any) -> str:
    """Echoes its keywords.

    Args:
        kwargs: Anything.
    """
    return repr(sorted(kwargs))


class StarApp(sw.Context):
    echo = st_echo


@sw.policy
async def st_bound(ctx: StarApp) -> str:
    result: str = await ctx.echo(**{"*": [2]})
    return result


@sw.policy
async def st_model(ctx: sw.Context) -> str:
    star = Message.call("st_echo", {"*": [2]})  # what a model may answer
    llm: Any = ScriptedLLM([[star]], name="st_model_llm")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[st_echo])
    [res] = [m.action_result for m in out if m.action_result is not None]
    return f"{res.error_type}: {res.error_message}" if res.is_error else f"ran {res.value}"


def _stores(tmp_path: Path) -> list[str | None]:
    return [None, f"sqlite:///{tmp_path / 'star.db'}"]


async def test_a_bound_attribute_refuses_it_in_memory_and_on_a_store(tmp_path: Path) -> None:
    errors = []
    for store in _stores(tmp_path):
        async with sw.Runner(store) as runner:
            with pytest.raises(sw.SerializationError) as caught:
                await runner.run(st_bound, run_id="bound")
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert errors[0].startswith("arguments of run 'bound', step 1: a keyword argument")


async def test_a_models_tool_call_with_it_gets_one_answer_in_memory_and_on_a_store(
    tmp_path: Path,
) -> None:
    """The model's reply is data: whatever the answer, memory and a store
    must give the same one (and the store must not fail the run)."""
    answers = []
    for store in _stores(tmp_path):
        async with sw.Runner(store) as runner:
            answers.append(await runner.run(st_model, run_id="model"))
    assert answers[0] == answers[1], answers


# -- tokens --------------------------------------------------------------------

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


def test_the_api_refuses_to_start_with_a_token_no_client_can_send(tmp_path: Path) -> None:
    """An HTTP header carries bytes read as latin-1: a client's UTF-8 'é'
    arrives as two other characters, so such a token could never match."""
    from stalwart.api import create_app

    with pytest.raises(ValueError, match="other than ASCII"):
        create_app(f"sqlite:///{tmp_path / 'api.db'}", [st_echo], tokens=["é" * MIN_TOKEN])


def test_the_environment_variable_is_checked_and_never_echoed(tmp_path: Path) -> None:
    from stalwart.cli.app import app

    secret = "envTok1"
    env = {"STALWART_API_TOKENS": f" {GOOD} ,{secret},", "STALWART_STORE": None, "NO_COLOR": "1"}
    result = CliRunner(env=env).invoke(
        app,
        [
            "serve",
            "--app",
            "tests.review7.test_star_and_tokens:st_echo",
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
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
