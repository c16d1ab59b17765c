"""What an application context class binds: policies named after their
attribute, providers and agents callable as attributes, and all of it typed
with the policy's real signature under ``mypy --strict``."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

import stalwart as sw
from stalwart.llm import Agent
from stalwart.llm import openai as openai_model
from stalwart.testing import ScriptedLLM, call

from ._support import Recorder

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = ROOT / "tests" / "llm" / "payloads" / "openai_chat_text.json"


@sw.policy
async def web_search(query: str) -> list[str]:
    """Search the web."""
    return [f"{query}: found"]


@sw.policy(name="fetch_page")
async def fetch(url: str) -> str:
    """Fetch a page."""
    return f"<html>{url}</html>"


class Tools(sw.Context):
    search = web_search  # no name was given: bound as "search"
    web_search = web_search  # bound under its own name: the policy itself
    page = fetch  # a name was given: kept


def test_a_policy_without_a_given_name_is_named_after_its_attribute() -> None:
    assert Tools.search.name == "search"
    assert Tools.search.spec.name == "search"  # what a model is shown
    assert Tools.search.parameters == web_search.parameters
    assert Tools.web_search is web_search
    assert Tools.page is fetch and fetch.name == "fetch_page"
    assert web_search.name == "web_search"  # the policy itself is not changed


async def test_the_bound_name_is_the_step_and_the_tool_a_model_calls() -> None:
    @sw.policy
    async def agent(ctx: Tools) -> list[sw.Message]:
        await ctx.search(query="direct")
        llm = ScriptedLLM([call("search", query="by model")])
        return await ctx.call(llm, observations=[], options=[ctx.search, ctx.page])

    hook = Recorder()
    out = await sw.Runner(hooks=[hook]).run(agent)
    assert out[-1].action_result.value == ["by model: found"]
    assert [n for _, n, _ in hook.of("before")] == ["agent", "search", "scripted_llm", "search"]


class Staff(sw.Context):
    helper = Agent(ScriptedLLM(["Paris."]), instructions="Answer briefly.")
    named = Agent(ScriptedLLM(["Lyon."]), name="second_opinion")
    llm = ScriptedLLM([call("search", query="x"), "done"])
    search = web_search


async def test_agents_and_model_objects_bound_on_a_context_are_callable_steps() -> None:
    @sw.policy
    async def office(ctx: Staff) -> list[Any]:
        first = await ctx.helper(question="Capital of France?")
        second = await ctx.named(question="And the second city?")
        reply = await ctx.llm(observations=[sw.Message.user("hi")], options=[ctx.search])
        return [first, second, reply[-1].action_result.value]

    hook = Recorder()
    assert await sw.Runner(hooks=[hook]).run(office) == ["Paris.", "Lyon.", ["x: found"]]
    steps = [(k, n) for k, n, _ in hook.of("before") if "." not in k]
    assert steps == [
        ("", "office"),
        ("1", "helper"),
        ("2", "second_opinion"),
        ("3", "llm"),
        ("3#1", "search"),
    ]
    assert isinstance(Staff.helper, Agent)  # on the class, the object itself


async def test_a_provider_bound_on_a_context_is_a_step_named_after_its_attribute() -> None:
    openai = pytest.importorskip("openai")  # the provider's SDK (extra "openai")
    requests: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(json.loads(request.read()))
        return httpx.Response(200, json=json.loads(PAYLOAD.read_text()))

    client = openai.AsyncOpenAI(
        api_key="test",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
    )

    class Chat(sw.Context):
        llm = openai_model("gpt-4o", client=client)

    @sw.policy
    async def chat(ctx: Chat) -> str:
        reply = await ctx.llm(observations=[sw.Message.user("Weather in Paris?")])
        return reply[-1].text

    hook = Recorder()
    try:
        assert await sw.Runner(hooks=[hook]).run(chat) == (
            "It is 18 °C and partly cloudy in Paris right now."
        )
    finally:
        await client.close()
    assert [n for _, n, _ in hook.of("before")] == ["chat", "llm"]
    assert requests[0]["messages"][-1]["content"] == "Weather in Paris?"


# -- typing ----------------------------------------------------------------------
TYPED_APP = """

import stalwart as sw
from stalwart.llm import Agent
from stalwart.testing import ScriptedLLM


@sw.policy
async def web_search(query: str, max_results: int = 5) -> list[str]:
    return [query] * max_results


@sw.policy(retries=2, name="fetch_page")
async def fetch(url: str) -> str:
    return url


class ResearcherClass:
    ctx: App

    async def __call__(self, question: str) -> str:
        found = await self.ctx.search(query=question)
        return found[0]


Researcher = sw.policy(ResearcherClass)


class App(sw.Context):
    search = web_search
    fetch = fetch
    research = Researcher
    helper = Agent(ScriptedLLM(["ok"]))


@sw.policy
async def main(ctx: App, question: str) -> str:
    found: list[str] = await ctx.search(query=question, max_results=2)
    page: str = await ctx.fetch(url=found[0])
    answer: str = await ctx.research(question=page)
    helped = await ctx.helper(question=answer)
    return f"{answer} {helped}"


async def outside() -> str:
    return await main(question="q")
"""

WRONG_CALLS = {
    "await ctx.search(query=1)": 'Argument "query" has incompatible type "int"',
    'await ctx.fetch(link="x")': 'Unexpected keyword argument "link"',
    'await ctx.research(questio="x")': 'Unexpected keyword argument "questio"',
    "await ctx.helper(question=3)": 'Argument "question" to "__call__" of "BoundAgent"',
    "await fetch(url=2)": 'Argument "url" to "__call__" of "Policy"',
    'await ctx.llm(observations="hi")': 'Argument "observations" to "__call__" of "BoundModel"',
}

WRONG_APP = """

import stalwart as sw
from stalwart.llm import openai
from typed_app import App, fetch


class Chat(App):
    llm = openai("gpt-4o", api_key="unused")


@sw.policy
async def wrong(ctx: Chat) -> None:
{calls}
"""


def mypy(folder: Path, module: str) -> subprocess.CompletedProcess[str]:
    # Run from the project, so its mypy cache (warm after `mypy`) is reused.
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--config-file", str(folder / "mypy.ini"), str(folder / module)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_bound_attributes_and_policies_type_check_with_their_real_signature(
    tmp_path: Path,
) -> None:
    (tmp_path / "mypy.ini").write_text("[mypy]\npython_version = 3.11\n")
    (tmp_path / "typed_app.py").write_text(TYPED_APP)
    calls = textwrap.indent("\n".join(WRONG_CALLS), "    ")
    (tmp_path / "wrong_app.py").write_text(WRONG_APP.format(calls=calls))

    clean = mypy(tmp_path, "typed_app.py")
    assert clean.returncode == 0, clean.stdout + clean.stderr

    wrong = mypy(tmp_path, "wrong_app.py")
    errors = [line for line in wrong.stdout.splitlines() if ": error:" in line]
    lines = (tmp_path / "wrong_app.py").read_text().splitlines()
    for code, expected in WRONG_CALLS.items():
        line_no = lines.index(f"    {code}") + 1
        found = [e for e in errors if f"wrong_app.py:{line_no}:" in e]
        assert found and expected in found[0], (code, errors)
    assert len(errors) == len(WRONG_CALLS), errors
