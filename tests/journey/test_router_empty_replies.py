"""The router: a model reply with neither a route nor
any words is not a question to put to the user. The router asks the model
again (it is one of its ``max_rounds``) instead of suspending the run on an
empty prompt that a person would have to answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.journey import NoRoute, Router
from stalwart.testing import ScriptedLLM, call


@sw.policy
async def quiet_billing(message: str) -> str:
    """Charges and invoices."""
    return f"billing heard {message!r}"


@sw.policy
async def quiet_support(message: str) -> str:
    """Technical problems."""
    return f"support heard {message!r}"


def finish(router: Router, message: str) -> Any:
    """The run's outcome; a run that waits for the user instead (which in
    memory nobody could ever answer) fails the test rather than hanging it."""

    async def go() -> Any:
        async with sw.Runner() as runner:
            return await asyncio.wait_for(runner.run(router, message=message), 10)

    return asyncio.run(go())


def test_an_empty_reply_is_not_asked_of_the_user_the_model_chooses_again() -> None:
    router = Router(
        ScriptedLLM(
            [Message.assistant(""), call("route_to_quiet_billing")], name="quiet_desk_model"
        ),
        [quiet_billing, quiet_support],
        name="quiet_desk",
    )
    assert finish(router, "charged twice") == "billing heard 'charged twice'"


def test_a_model_that_only_ever_says_nothing_runs_out_of_turns() -> None:
    router = Router(
        ScriptedLLM([Message.assistant(" ")] * 2, name="quiet_mute_model"),
        [quiet_billing, quiet_support],
        name="quiet_mute",
        max_rounds=2,
    )
    with pytest.raises(NoRoute, match=r"router 'quiet_mute'.*in 2 calls"):
        finish(router, "hello?")
