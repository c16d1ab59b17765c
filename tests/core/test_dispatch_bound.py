"""Bound arguments: ``functools.partial(tool, account_id=7)`` as an option.

The program sets ``account_id``; the model is not shown it and cannot give
it. Callables that cannot be a policy (generators) fail when they are made
one, with their name.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.core.policy import as_policy
from stalwart.llm import Agent, tool_specs
from stalwart.testing import ScriptedLLM, call

MOVED: list[tuple[int, float]] = []


class Bank(sw.Context):
    """An application context, to check that a bound tool still gets its own."""


@sw.policy(retries=2, exclusive=True)
async def transfer(ctx: Bank, account_id: int, amount: float, note: str = "") -> str:
    """Move money out of an account.

    Args:
        account_id: The account to debit.
        amount: How much, in euros.
        note: A note for the statement.
    """
    assert isinstance(ctx, Bank)
    MOVED.append((account_id, amount))
    return f"moved {amount} from {account_id}"


async def balance(account_id: int, currency: str = "EUR") -> str:
    """An account's balance.

    Args:
        account_id: The account.
        currency: The currency to show it in.
    """
    return f"{account_id}: 100 {currency}"


def offered(*replies: Any, tools: list[Any]) -> Any:
    agent = Agent(ScriptedLLM(list(replies)), tools=tools, max_rounds=4)
    return sw.Runner().run_sync(agent, question="go")


def test_the_model_is_not_shown_a_bound_argument() -> None:
    [spec] = tool_specs([functools.partial(transfer, account_id=7)])
    assert spec.name == "transfer"
    assert spec.description == "Move money out of an account."
    assert set(spec.parameters["properties"]) == {"amount", "note"}
    assert spec.parameters["required"] == ["amount"]
    [plain] = tool_specs([functools.partial(balance, account_id=7)])
    assert plain.name == "balance" and set(plain.parameters["properties"]) == {"currency"}


def test_a_bound_tool_runs_with_the_programs_value() -> None:
    MOVED.clear()
    answer = offered(
        call("transfer", amount="12.5"), "done", tools=[functools.partial(transfer, account_id=7)]
    )
    assert answer == "done"
    assert MOVED == [(7, 12.5)]  # the model's amount, coerced; the program's account


def test_a_model_that_gives_a_bound_argument_reads_an_error_and_nothing_runs() -> None:
    MOVED.clear()
    seen: list[str] = []

    def last_result(observations: list[Message], options: Any) -> str:
        seen.append(observations[-1].text)
        return "sorry"

    offered(
        call("transfer", amount=5, account_id=99),
        last_result,
        tools=[functools.partial(transfer, account_id=7)],
    )
    assert MOVED == []
    assert seen == [
        "InvalidArguments: invalid arguments for 'transfer': "
        "account_id: set by the program; a model may not give it"
    ]


def test_a_partial_of_a_policy_keeps_its_settings() -> None:
    pol = as_policy(functools.partial(transfer, account_id=7))
    assert (pol.name, pol.retries, pol.exclusive) == ("transfer", 2, True)
    assert pol.ctx_class is Bank  # resolved from the tool's own module


def test_a_bound_tool_records_and_replays_like_any_other(sqlite_url: str) -> None:
    MOVED.clear()
    url = sqlite_url
    tools = [functools.partial(transfer, account_id=7)]
    agent = Agent(ScriptedLLM([call("transfer", amount=3), "done"]), tools=tools, name="teller")
    assert sw.Runner(url).run_sync(agent, question="go", run_id="t") == "done"
    assert sw.Runner(url).run_sync(agent, question="go", run_id="t") == "done"
    assert MOVED == [(7, 3.0)]  # the second run was answered from the ledger

    async def recorded() -> dict[str, str | None]:
        async with sw.Runner(url, serving=False) as runner:
            return {s.name: s.args for s in await runner.steps("t")}

    args = asyncio.run(recorded())
    assert args["transfer"] == '{"amount":3.0,"note":""}'  # the model's arguments only


def test_positional_binding_is_refused_at_definition_with_the_way_to_write_it() -> None:
    with pytest.raises(TypeError, match=r"policy 'balance': bind its arguments by keyword"):
        as_policy(functools.partial(balance, 7))


def test_binding_a_name_the_tool_does_not_take_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"'balance'.*binds 'acount_id'.*account_id, currency"):
        Agent(ScriptedLLM([]), tools=[functools.partial(balance, acount_id=7)])


def test_an_async_generator_tool_fails_at_definition_naming_it() -> None:
    async def stream_prices(symbol: str) -> Any:
        yield 1

    with pytest.raises(
        TypeError, match=r"policy 'stream_prices' \(.*stream_prices\) is an async generator"
    ):
        sw.policy(stream_prices)
    with pytest.raises(
        TypeError, match=r"policy 'stream_prices' \(.*stream_prices\) is an async generator"
    ):
        Agent(ScriptedLLM([]), tools=[stream_prices])
    with pytest.raises(
        TypeError, match=r"policy 'stream_prices' \(.*stream_prices\) is an async generator"
    ):
        as_policy(functools.partial(stream_prices, symbol="X"))


def test_a_generator_offered_at_a_call_fails_before_the_model_is_paid_for() -> None:
    def numbers() -> Any:
        yield 1

    llm = ScriptedLLM(["never"])

    @sw.policy
    async def agent(ctx: sw.Context) -> Any:
        return await ctx.call(llm, observations=[Message.user("go")], options=[numbers])

    with pytest.raises(
        TypeError, match=r"policy 'numbers' \(.*<locals>\.numbers\) is a generator function"
    ):
        sw.Runner().run_sync(agent)
    assert llm.calls == 0
