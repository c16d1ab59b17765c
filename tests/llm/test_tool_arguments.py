"""A model's tool arguments that cannot be read are the model's error to read, never a failed call.

Through the official openai SDK: a reply whose tool call's arguments are
nested 100,000 deep is kept; the tool is not run; the model is told why on its
next turn, and the durable run goes on to the answer.
"""

from __future__ import annotations

from collections.abc import Callable

import stalwart as sw
from stalwart import llm

from .conftest import Answer, Replay, payload_json

RAN: list[str] = []


@sw.policy
async def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: City name, e.g. Paris
    """
    RAN.append(city)
    return "18 °C"


async def test_arguments_nested_100000_deep_are_an_error_the_model_reads(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    deep = payload_json("openai_chat_tool_call.json")
    call = deep["choices"][0]["message"]["tool_calls"][0]
    call["function"]["arguments"] = '{"city": ' + "[" * 100_000 + "]" * 100_000 + "}"
    r = replay(Answer("deep", body=deep), "openai_chat_text.json")
    agent = llm.Agent(llm.openai("gpt-4o", client=r.openai()), tools=[get_weather])
    async with sw.Runner(sqlite_url) as runner:
        answer = await runner.run(agent, question="Weather in Paris?", run_id="deep")
        steps = await runner.steps("deep")
    assert answer == "It is 18 °C and partly cloudy in Paris right now."
    assert RAN == []  # the tool never ran on arguments nobody could read
    told = r.sent["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == call["id"]
    assert told["content"].startswith("InvalidArguments: arguments for 'get_weather'")
    assert "nested more than 100 levels deep" in told["content"]
    assert len(told["content"]) < 3000
    assert [s.error for s in steps] == [None] * len(steps)  # every call recorded, none failed
