"""PocketJoe programs served by `stalwart mcp serve`: the SDK's own client
over stdio against a real server process, for 0.1's `@policy_spec_mcp_tool`
classes and 0.2's `@policy.tool` / `@policy.resource` functions."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tests.mcp.serving import served_mcp

from stalwart.pocketjoe.policy_spec_mcp import served_policies
from stalwart.stores import open_store

pytestmark = pytest.mark.timeout(90)

# A PocketJoe 0.1 program, as its author would write it (imports changed).
APP_V01 = '''
from stalwart.pocketjoe import BaseContext, Message, Policy, policy_spec_mcp_tool


@policy_spec_mcp_tool(name="to_miles", description="Kilometres to miles")
class ToMiles(Policy):
    async def __call__(self, km: float) -> list[Message]:
        """:param km: A distance in kilometres."""
        miles = round(km / 1.609344, 1)
        return [Message(actor="to_miles", type="text", payload={"content": miles})]


@policy_spec_mcp_tool(name="race_miles")
class RaceMiles(Policy):
    async def __call__(self, race: str) -> list[Message]:
        """A race's length in miles.

        :param race: "marathon" or "half".
        """
        km = {"marathon": 42.195, "half": 21.0975}[race]
        return await self.ctx.to_miles(km=km)


class Hidden(Policy):
    async def __call__(self) -> list[Message]:
        return []


class Units(BaseContext):
    def __init__(self, runner):
        super().__init__(runner)
        self.to_miles = self._bind(ToMiles)
        self.race = self._bind(RaceMiles)
        self.hidden = self._bind(Hidden)
'''


def _docs_program() -> str:
    """The 0.2 program of docs/pocketjoe.md's "Served over MCP": the docs
    show what this test serves."""
    text = (Path(__file__).parents[2] / "docs" / "pocketjoe.md").read_text()
    section = text[text.index("## Served over MCP") :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```\n", start)]


APP_V02 = _docs_program()


async def _runs(store: str) -> dict[str, tuple[str, str, list[str]]]:
    """Each run in the store: its policy, status and step names."""
    s = open_store(store)
    await s.open()
    try:
        out = {}
        for r in await s.list_runs():
            steps = [st.name for st in (await s.load_steps(r.id)).values()]
            out[r.id] = (r.policy, r.status, sorted(steps))
        return out
    finally:
        await s.close()


async def test_v01_policy_spec_mcp_tool_classes_are_served(tmp_path: Path, sqlite_url: str) -> None:
    app = tmp_path / "units_app.py"
    app.write_text(APP_V01)
    store = sqlite_url
    async with served_mcp("stdio", store, app=app) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {"to_miles", "race_miles"}  # `Hidden` is bound, not marked
        assert listed["to_miles"].description == "Kilometres to miles"
        assert listed["to_miles"].input_schema["properties"]["km"] == {
            "type": "number",
            "description": "A distance in kilometres.",
        }
        assert listed["race_miles"].description == "A race's length in miles."
        assert listed["race_miles"].input_schema["required"] == ["race"]

        ok = await client.call_tool("race_miles", {"race": "marathon"})
        assert not ok.is_error
        assert '"payload": {"content": 26.2}' in ok.content[0].text

        bad = await client.call_tool("race_miles", {})
        assert bad.is_error and "race" in bad.content[0].text

    runs = await _runs(store)
    [(run_id, (name, status, steps))] = runs.items()  # the invalid call started no run
    assert run_id.startswith("mcp-race_miles-")
    # The run is the bound policy's (named by its attribute, `race`): its
    # decision, then the context's `to_miles` as a step.
    assert (name, status) == ("race", "succeeded")
    assert "to_miles" in steps


async def test_v02_policy_tools_and_resources_are_served(tmp_path: Path, sqlite_url: str) -> None:
    app = tmp_path / "calc_app.py"
    app.write_text(APP_V02)
    store = sqlite_url
    async with served_mcp("stdio", store, app=app) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {"add", "double_sum"}  # `off` is enabled=False
        assert listed["add"].description == "Adds two integers"
        schema = listed["add"].input_schema
        assert schema["properties"]["a"] == {"type": "integer", "description": "The first addend."}
        assert schema["required"] == ["a"]
        assert listed["double_sum"].description == "Twice the sum, through the bound add."

        # Not bound on Calc, it reaches the context with Calc.get_ctx().
        ok = await client.call_tool("double_sum", {"a": 2, "b": "3"})
        assert not ok.is_error and ok.content[0].text == "10"

        [res] = (await client.list_resources()).resources
        assert (str(res.uri), res.name, res.mime_type) == ("calc://about", "about", "text/plain")
        assert res.description == "What this calculator does."
        read = await client.read_resource("calc://about")
        assert read.contents[0].text == "adds integers"

    runs = await _runs(store)
    tool_runs = [v for k, v in runs.items() if k.startswith("mcp-double_sum-")]
    assert tool_runs == [("double_sum", "succeeded", ["add", "double_sum"])]
    assert ("about", "succeeded", ["about"]) in runs.values()  # a read is a run too


def _module(path: Path, source: str) -> ModuleType:
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_context_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    source = APP_V01.replace("def __init__(self, runner):", "def __init__(self, runner, key):")
    mod = _module(tmp_path / "needs_key.py", source)
    with pytest.raises(ValueError, match=r"cannot make the context Units\(runner\).*key"):
        served_policies(mod)


def test_a_module_without_pocketjoe_marks_gives_nothing(tmp_path: Path) -> None:
    mod = _module(tmp_path / "plain.py", "import stalwart as sw\n")
    assert served_policies(mod) == ({}, [])


def test_the_cli_refuses_a_context_it_cannot_make(tmp_path: Path) -> None:
    app = tmp_path / "broken_app.py"
    app.write_text(
        APP_V02.replace("def __init__(self, runner):", "def __init__(self, runner, key):")
    )
    done = subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "mcp", "serve", "--app", str(app)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cannot make the context Calc(runner)" in done.stderr
