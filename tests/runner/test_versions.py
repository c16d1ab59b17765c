"""A policy's code version (recorded on every run it starts) changes when what
decides its steps changes, and only then: the same code gives the same
version in any process; an agent's model, instructions, tools or output type,
a callee's code, a flow's graph each change it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.policy import as_policy
from stalwart.runner.versions import code_version

AGENTS = """
import stalwart as sw
from pydantic import BaseModel
from stalwart import llm
from stalwart.testing import ScriptedLLM


class Answer(BaseModel):
    text: str


@sw.policy
async def lookup(ctx: sw.Context, order: str) -> str:
    \"\"\"Look an order up.

    Args:
        order: The order.
    \"\"\"
    return "order " + order


model = ScriptedLLM([], name="model")
desk = llm.Agent(model, instructions="You answer orders.", tools=[lookup], name="desk")
"""


def load(tmp_path: Path, source: str, folder: str, name: str = "app") -> ModuleType:
    """``source`` as module ``name`` from a folder of its own: one program's
    module, as two deploys of it would import it."""
    (tmp_path / folder).mkdir()
    path = tmp_path / folder / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def version(obj: Any) -> str:
    return code_version(as_policy(obj))


@pytest.fixture
def agents(tmp_path: Path) -> Any:
    count = iter(range(1000))

    def make(source: str = AGENTS, **replace: str) -> Any:
        for old, new in replace.items():
            assert old in source
            source = source.replace(old, new)
        return load(tmp_path, source, f"v{next(count)}").desk

    return make


def test_the_same_agent_has_the_same_version(agents: Any) -> None:
    assert version(agents()) == version(agents())


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('instructions="You answer orders."', 'instructions="You answer orders politely."'),
        ('ScriptedLLM([], name="model")', 'ScriptedLLM([], name="other_model")'),
        ("tools=[lookup]", "tools=[]"),
        ('return "order " + order', 'return "Order " + order'),  # a tool's own code
        ('name="desk")', 'name="desk", output_type=Answer)'),
        ('name="desk")', 'name="desk", max_rounds=3)'),
    ],
)
def test_what_decides_an_agents_steps_changes_its_version(agents: Any, old: str, new: str) -> None:
    assert version(agents(**{old: new})) != version(agents())


def test_agents_with_the_same_code_differ_by_name_only_when_named_apart(agents: Any) -> None:
    renamed = agents(**{'name="desk")': 'name="counter")'})
    assert version(renamed) != version(agents())


CHAIN = """
import stalwart as sw


@sw.policy
async def fetch(ctx: sw.Context, url: str) -> str:
    return "page " + url


@sw.policy
async def summarize(ctx: sw.Context, url: str) -> str:
    page = await fetch(url=url)
    return page[:10]
"""


def test_a_callees_code_changes_its_callers_version(tmp_path: Path) -> None:
    before = load(tmp_path, CHAIN, "a").summarize
    same = load(tmp_path, CHAIN, "b").summarize
    changed = load(tmp_path, CHAIN.replace('"page "', '"PAGE "'), "c").summarize
    assert version(before) == version(same)
    assert version(changed) != version(before)


FLOW = """
from stalwart.flow import Flow, Node


class Fetch(Node):
    def exec(self, _):
        return "page"


class Report(Node):
    def exec(self, _):
        return "report"


fetch = Fetch()
fetch - "done" >> Report()
flow = Flow(start=fetch)
"""


def test_a_flows_version_covers_its_nodes_code_and_its_graph(tmp_path: Path) -> None:
    base = version(load(tmp_path, FLOW, "a").flow)
    assert version(load(tmp_path, FLOW, "b").flow) == base
    node_code = FLOW.replace('return "report"', 'return "REPORT"')
    assert version(load(tmp_path, node_code, "c").flow) != base
    wiring = FLOW.replace('fetch - "done" >> Report()', 'fetch - "finished" >> Report()')
    assert version(load(tmp_path, wiring, "d").flow) != base


def test_agents_that_hand_off_to_each_other_have_a_version() -> None:
    from stalwart import llm
    from stalwart.testing import ScriptedLLM

    billing = llm.Agent(ScriptedLLM([], name="m"), name="billing", handoffs=["triage"])
    triage = llm.Agent(ScriptedLLM([], name="m"), name="triage", handoffs=[billing])
    assert len(version(triage)) == 12


def test_the_version_is_the_same_in_another_process(tmp_path: Path) -> None:
    (tmp_path / "agents_shared.py").write_text(AGENTS)
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); import agents_shared; "
        "from stalwart.core.policy import as_policy; "
        "from stalwart.runner.versions import code_version; "
        "print(code_version(as_policy(agents_shared.desk)))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", program, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env={**_env(), "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    sys.path.insert(0, str(tmp_path))
    try:
        import agents_shared  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    assert seen == {version(agents_shared.desk)}


def test_a_file_run_as_a_script_has_the_version_it_has_imported(tmp_path: Path) -> None:
    """``python app.py`` (module ``__main__``) and a worker importing ``app``
    run the same code: a run one starts, the other must continue."""
    script = AGENTS + (
        "\nif __name__ == '__main__':\n"
        "    from stalwart.core.policy import as_policy\n"
        "    from stalwart.runner.versions import code_version\n"
        "    print(code_version(as_policy(desk)))\n"
    )
    (tmp_path / "desk_app.py").write_text(script)
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "desk_app.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=_env(),
    ).stdout.strip()
    imported = load(tmp_path, script, "imported", name="desk_app").desk
    assert ran == version(imported)


def _env() -> dict[str, str]:
    import os

    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src}


async def test_a_run_records_its_policys_version_unless_the_runner_names_one(
    tmp_path: Path, agents: Any
) -> None:
    desk = agents()
    url = f"sqlite:///{tmp_path / 'v.db'}"
    async with sw.Runner(url) as runner:
        await runner.enqueue(desk, question="?", run_id="q1")
        assert (await runner.get_run("q1")).code_version == version(desk)
    async with sw.Runner(url, code_version="2026-11-28") as runner:
        await runner.enqueue(desk, question="?", run_id="q2")
        assert (await runner.get_run("q2")).code_version == "2026-11-28"
