"""An agent's output type in the provider's own structured output mode, through the
official SDKs on recorded payloads.

What is checked is what goes on the wire (OpenAI's ``response_format`` and
``text.format`` json_schema, Anthropic's forced tool), that a typed instance
comes back, that an answer that does not validate is still repaired, that the
mode is recorded with the call so a replay matches, and that models without a
mode (a scripted model) and types that are not JSON objects are asked in the
prompt as before.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

import stalwart as sw
from stalwart import llm
from stalwart.core import codec
from stalwart.core.message import Message
from stalwart.testing import ScriptedLLM, replay_async

from .conftest import Answer, Replay, payload_json
from .weather import RAN, TOOLS, make_model


class Forecast(BaseModel):
    city: str
    temperature: float
    sky: str | None = None


class Closed(BaseModel):
    """A type OpenAI's strict mode takes as it is: closed, every field required."""

    model_config = ConfigDict(extra="forbid")
    city: str
    temperature: float


ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = {
    "chat": "openai_chat_structured.json",
    "responses": "openai_responses_structured.json",
    "anthropic": "anthropic_structured_tool_use.json",
}
PARIS = Forecast(city="Paris", temperature=18.0, sky="partly cloudy")
PROMPTED = "Give your final answer as one JSON object"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


def system_text(kind: str, sent: dict[str, object]) -> str:
    """The system prompt the request carried ("" without one)."""
    if kind == "anthropic":
        return str(sent.get("system", ""))
    if kind == "chat":
        messages = sent["messages"]
        assert isinstance(messages, list)
        return "".join(m["content"] for m in messages if m["role"] == "system")
    items = sent["input"]
    assert isinstance(items, list)
    return "".join(i["content"] for i in items if i.get("role") == "system")


@pytest.mark.parametrize("kind", ["chat", "responses", "anthropic"])
async def test_the_output_type_is_asked_for_in_the_providers_own_mode(
    kind: str, replay: Callable[..., Replay]
) -> None:
    r = replay(PAYLOAD[kind])
    agent = llm.Agent(make_model(kind, r), instructions="Be exact.", output_type=Forecast)
    forecast = await agent.run("Weather in Paris?")

    assert forecast == PARIS
    assert isinstance(forecast, Forecast)
    sent = r.sent
    schema = Forecast.model_json_schema()
    if kind == "chat":
        assert sent["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "Forecast", "schema": schema, "strict": False},
        }
    elif kind == "responses":
        assert sent["text"] == {
            "format": {"type": "json_schema", "name": "Forecast", "schema": schema, "strict": False}
        }
    else:
        assert sent["tools"] == [
            {
                "name": "Forecast",
                "description": "Give your final answer with this tool, once you have it.",
                "input_schema": schema,
            }
        ]
        assert sent["tool_choice"] == {"type": "tool", "name": "Forecast"}
    # The provider holds the model to the schema: the prompt does not repeat it.
    assert system_text(kind, sent) == "Be exact."


async def test_with_tools_anthropic_must_call_one_and_ends_on_the_answer_tool(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay("anthropic_tool_use.json", "anthropic_structured_tool_use.json")
    agent = llm.Agent(make_model("anthropic", r), tools=TOOLS, output_type=Forecast)
    async with sw.Runner(sqlite_url) as runner:
        forecast = await runner.run(agent, question="Weather in Paris?", run_id="paris")
        steps = {s.key: s for s in await runner.steps("paris")}

    assert forecast == PARIS
    assert RAN == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    for request in r.requests:
        body = request.json()
        assert [t["name"] for t in body["tools"]] == ["get_weather", "get_time", "Forecast"]
        assert body["tool_choice"] == {"type": "any"}  # a tool, any, not always the answer
    # The answer tool's call is recorded as the answer's JSON text, not a call to run.
    assert sorted(steps) == ["1", "1#1", "2"]
    (reply,) = codec.loads(steps["2"].output or "null")
    assert reply.action_call is None
    assert Forecast.model_validate_json(reply.text) == PARIS


async def test_a_closed_type_is_sent_in_openais_strict_mode(
    replay: Callable[..., Replay],
) -> None:
    closed = '{"city":"Paris","temperature":18.0}'
    chat_body = payload_json("openai_chat_structured.json")
    chat_body["choices"][0]["message"]["content"] = closed
    responses_body = payload_json("openai_responses_structured.json")
    responses_body["output"][0]["content"][0]["text"] = closed
    r = replay(Answer("chat.json", body=chat_body), Answer("responses.json", body=responses_body))
    paris = Closed(city="Paris", temperature=18.0)
    chat = llm.Agent(make_model("chat", r), output_type=Closed)
    assert await chat.run("Weather in Paris?") == paris
    assert r.requests[0].json()["response_format"]["json_schema"]["strict"] is True
    responses = llm.Agent(make_model("responses", r), output_type=Closed)
    assert await responses.run("Weather in Paris?") == paris
    assert r.requests[1].json()["text"]["format"]["strict"] is True


async def test_an_answer_that_does_not_validate_is_still_repaired(
    replay: Callable[..., Replay],
) -> None:
    wrong = payload_json("openai_chat_structured.json")
    wrong["choices"][0]["message"]["content"] = '{"city": "Paris", "temperature": "warm"}'
    r = replay(Answer("wrong.json", body=wrong), "openai_chat_structured.json")
    agent = llm.Agent(make_model("chat", r), output_type=Forecast)
    assert await agent.run("Weather in Paris?") == PARIS
    second = r.requests[1].json()
    assert second["response_format"] == r.requests[0].json()["response_format"]
    repair = second["messages"][-1]
    assert repair["role"] == "user"
    assert "temperature: Input should be a valid number" in repair["content"]


async def test_a_fallback_chain_passes_the_mode_to_the_model_that_answers(
    replay: Callable[..., Replay],
) -> None:
    r1 = replay(Answer("openai_error_429.json", 429))
    r2 = replay("anthropic_structured_tool_use.json")
    chain = llm.fallback(make_model("chat", r1), make_model("anthropic", r2))
    agent = llm.Agent(chain, output_type=Forecast)
    assert await agent.run("Weather in Paris?") == PARIS
    assert r1.sent["response_format"]["json_schema"]["name"] == "Forecast"
    assert r2.sent["tool_choice"] == {"type": "tool", "name": "Forecast"}


async def test_models_without_a_mode_and_types_that_are_not_objects_are_asked_in_the_prompt(
    replay: Callable[..., Replay],
) -> None:
    seen: list[list[Message]] = []

    def answer(observations: list[Message], options: object) -> str:
        seen.append(observations)
        return '{"city": "Paris", "temperature": 18}'

    scripted = llm.Agent(ScriptedLLM([answer]), output_type=Forecast)
    assert await scripted.run("Weather in Paris?") == Forecast(city="Paris", temperature=18)
    assert PROMPTED in seen[0][0].text
    # A chain with a model that has no mode asks every model in the prompt.
    r = replay("openai_chat_text.json")
    mixed = llm.fallback(make_model("chat", r), ScriptedLLM([answer]))
    assert not mixed.takes_output

    body = payload_json("openai_chat_structured.json")
    body["choices"][0]["message"]["content"] = '["Paris", "Lyon"]'
    r = replay(Answer("cities.json", body=body))
    cities = llm.Agent(make_model("chat", r), output_type=list[str])
    assert await cities.run("Two French cities?") == ["Paris", "Lyon"]
    assert "response_format" not in r.sent
    assert PROMPTED in r.sent["messages"][0]["content"]


async def test_a_replay_of_a_structured_run_matches_the_recorded_calls_and_calls_no_model(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay("anthropic_structured_tool_use.json")
    agent = llm.Agent(make_model("anthropic", r), output_type=Forecast, name="forecaster")
    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(agent, question="Paris?", run_id="typed") == PARIS
        (step,) = [s for s in await runner.steps("typed") if s.key == "1"]
    assert '"output"' in step.args and '"Forecast"' in step.args  # recorded with the call

    idle = replay()
    again = llm.Agent(make_model("anthropic", idle), output_type=Forecast, name="forecaster")
    report = await replay_async((sqlite_url, "typed"), again)
    assert report.ok, str(report)
    assert idle.requests == []


def test_a_tool_named_like_the_output_type_is_refused_for_anthropic() -> None:
    from stalwart.llm.anthropic import AnthropicMessages

    model = AnthropicMessages("claude-haiku-4-5", client=None)
    spec = llm.ToolSpec("Forecast", "A tool.", {"type": "object", "properties": {}})
    output = {"name": "Forecast", "schema": Forecast.model_json_schema(), "strict": False}
    with pytest.raises(ValueError, match="'Forecast' has the name of one of the tools"):
        model._request([Message.user("hi")], [spec], stream=False, output=output)


TYPED = """
from pydantic import BaseModel

from stalwart import llm
from stalwart.testing import ScriptedLLM


class Forecast(BaseModel):
    city: str


async def main() -> None:
    model = ScriptedLLM([])
    typed = llm.Agent(model, output_type=Forecast)
    reveal_type(await typed.run("Paris?"))
    reveal_type(await typed(question="Paris?"))
    reveal_type(await llm.Agent(model).run("Paris?"))
    city: int = (await typed.run("Paris?")).city
"""


def test_an_agents_answer_is_typed_by_its_output_type_for_mypy(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text("[mypy]\npython_version = 3.11\n")
    (tmp_path / "typed_agent.py").write_text(TYPED)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--config-file", str(tmp_path / "mypy.ini"), str(tmp_path / "typed_agent.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    lines = [line.split(": ", 2)[-1] for line in done.stdout.splitlines()]
    assert lines == [
        'Revealed type is "typed_agent.Forecast"',
        'Revealed type is "typed_agent.Forecast"',
        'Revealed type is "str"',
        'Incompatible types in assignment (expression has type "str", variable has type "int")'
        "  [assignment]",
    ], done.stdout + done.stderr
