"""The PocketFlow pattern ports in examples/pocketflow run, offline, and do what they say."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import stalwart as sw

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pocketflow"
NAMES = [
    "agent",
    "approval",
    "chat",
    "map_reduce",
    "parallel_translation",
    "rag",
    "two_agents",
    "two_agents_mailboxes",
    "writing",
]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"pocketflow_example_{name}", EXAMPLES / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look modules up
    spec.loader.exec_module(module)
    return module


def test_every_example_is_tested() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_runs_as_a_program(name: str, tmp_path: Path) -> None:
    args = ["--db", str(tmp_path / "approval.db")] if name == "approval" else []
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert "Warning" not in done.stderr


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    return [] if request.param == "memory" else ["--store", f"sqlite:///{tmp_path / 'x.db'}"]


def test_agent_searches_each_part_then_answers(store: list[str]) -> None:
    shared = load("agent").main(["Who created Python and when was Python 3.12 released?", *store])
    calls = [m.action_call for m in shared["messages"] if m.action_call is not None]
    assert [c.name for c in calls] == ["search", "search", "answer"]
    assert [c.arguments.get("query") for c in calls[:2]] == [
        "Who created Python",
        "when was Python 3.12 released",
    ]
    assert "Guido van Rossum" in shared["answer"] and "October 2, 2023" in shared["answer"]


def test_agent_answers_at_once_when_one_search_is_enough() -> None:
    shared = load("agent").main(["What is PocketFlow?"])
    assert shared["answer"].startswith("PocketFlow is a tiny framework")


def test_rag_indexes_offline_then_answers_online(store: list[str]) -> None:
    rag = load("rag")
    shared = rag.main(["How can a human approve a step?", *store])
    assert len(shared["index"]) == len(shared["chunks"]) == 9
    assert shared["retrieved"][0]["source"] == "agents.md"
    assert shared["answer"] == "A human can approve a step by sending a signal to a waiting run."
    assert rag.embed("replay") == rag.embed("replay")  # stable: no per-process hash seed


def test_map_reduce_screens_every_resume(store: list[str]) -> None:
    shared = load("map_reduce").main(store)
    assert set(shared["evaluations"]) == set(load("map_reduce").RESUMES)
    assert shared["summary"] == {
        "total": 5,
        "qualified": ["Ada Lovelace", "Margaret H", "Alan T"],
        "rate": 0.6,
    }


def test_translations_run_in_parallel(store: list[str]) -> None:
    module = load("parallel_translation")
    shared = module.main(["the agent reads the book", *store])
    assert shared["translations"]["french"] == "le agent lit le livre"
    assert shared["translations"]["german"] == "der Agent liest der Buch"
    assert len(shared["translations"]) == 8
    assert shared["elapsed"] < 4 * module.LATENCY  # not 8 x 0.1 s one after another


def test_chat_loops_until_the_inputs_run_out(store: list[str]) -> None:
    shared = load("chat").main(
        ["Hi, I'm Ada.", "What is a flow?", "What's my name?", "bye", *store]
    )
    replies = [m.text for m in shared["history"] if m.role == "assistant"]
    assert shared["turn"] == 3
    assert replies[0].startswith("Nice to meet you, Ada!")
    assert replies[-1] == "You are Ada."


def test_writing_outlines_writes_each_section_then_polishes(store: list[str]) -> None:
    shared = load("writing").main(["testing", *store])
    assert len(shared["outline"]) == 3
    assert list(shared["sections"]) == shared["outline"]
    article = shared["article"]
    assert article.startswith("# Testing\n")
    assert all(section in article for section in shared["sections"].values())


def test_two_agents_play_through_queues() -> None:
    module = load("two_agents")
    assert module.main(["python"])["guesses"] == ["boa", "python"]
    assert module.main(["java"])["guesses"] == ["java"]
    assert module.main(["cobra"])["hints"] == ["It is a kind of snake.", "Its bite is venomous."]


def test_two_durable_agents_play_the_same_game_through_their_mailboxes(tmp_path: Path) -> None:
    queued, mailed = load("two_agents"), load("two_agents_mailboxes")
    for secret in ("python", "java", "cobra"):
        db = str(tmp_path / f"{secret}.db")
        assert mailed.main([secret, "--db", db]) == queued.main([secret])

    async def runs() -> list[tuple[str, str]]:
        async with sw.Runner(f"sqlite:///{tmp_path / 'python.db'}") as runner:
            return sorted((r.id, r.status) for r in await runner.list_runs())

    assert asyncio.run(runs()) == [("game-guesser", "succeeded"), ("game-hinter", "succeeded")]


async def test_a_durable_run_refuses_the_queues_before_any_node_and_names_mailboxes(
    tmp_path: Path,
) -> None:
    module = load("two_agents")
    shared = {"secret": "python", "to_hinter": asyncio.Queue(), "hints": [], "guesses": []}
    async with sw.Runner(f"sqlite:///{tmp_path / 'q.db'}") as runner:
        with pytest.raises(sw.SerializationError) as caught:
            await runner.run(module.agent(module.Hinter()), shared=shared, run_id="queued")
        assert await runner.list_runs() == []
    message = str(caught.value)
    assert "['to_hinter']" in message and "asyncio.queues.Queue" in message
    assert "use their mailboxes (ctx.send and ctx.receive)" in message


def test_approval_waits_durably_for_the_reviewer(tmp_path: Path) -> None:
    started = time.perf_counter()
    shared: dict[str, Any] = load("approval").main(["--db", str(tmp_path / "a.db")])
    assert [r["approved"] for r in shared["reviews"]] == [False, True]
    assert len(shared["drafts"]) == 2
    assert (
        shared["published"] == "Announcing Stalwart 1.0: fast and durable. Available from Monday."
    )
    assert time.perf_counter() - started < 10


PROGRAM = EXAMPLES.parent / "pocketflow_program" / "essay.py"


def test_the_pocketflow_program_runs_unchanged_and_durably_by_stalwart_run(
    tmp_path: Path,
) -> None:
    imports = [
        line for line in PROGRAM.read_text().splitlines() if line.startswith(("import", "from"))
    ]
    assert imports == ["import sys", "from pocketflow import BatchNode, Flow, Node"]
    url = f"sqlite:///{tmp_path / 'essay.db'}"

    def stalwart_run(*args: str, given: str = "") -> str:
        done = subprocess.run(
            [sys.executable, "-m", "stalwart", "run", str(PROGRAM), *args, "--store", url],
            input=given,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    essay = stalwart_run("durable", "agents")
    assert essay.startswith("# Durable agents\n\n## What durable agents are\n")
    assert essay.count("## ") == 3
    assert stalwart_run("durable", "agents") == essay  # replayed from the ledger
    asked = stalwart_run(given="testing\n")  # no topic: it asks for one, inside the flow
    assert asked.startswith("Topic: # Testing\n")

    async def runs() -> list[tuple[str, str, list[str]]]:
        async with sw.Runner(url) as runner:
            found = []
            for run in await runner.list_runs():
                steps = [s.name for s in await runner.steps(run.id)]
                found.append((run.id, run.status, steps))
            return found

    [(_, status, steps), (_, other_status, other_steps)] = asyncio.run(runs())
    assert status == other_status == "succeeded"
    assert ("input" in steps) != ("input" in other_steps)  # the one asked recorded its answer


CHART = EXAMPLES.parent / "pocketflow_program" / "chart.py"


def test_the_chart_program_records_its_table_and_image_by_their_codecs(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("PIL")
    imports = [
        line for line in CHART.read_text().splitlines() if line.startswith(("import", "from"))
    ]
    assert imports == [
        "import sys",
        "import pandas as pd",
        "from PIL import Image",
        "from pocketflow import Flow, Node",
    ]
    url = f"sqlite:///{tmp_path / 'chart.db'}"

    def stalwart_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "stalwart", "run", str(CHART), *args, "--store", url],
            capture_output=True,
            text=True,
            timeout=60,
        )

    codecs = ("--codec", "pandas", "--codec", "pil")
    done = stalwart_run("Oslo", "Lima", *codecs)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2 cities, warmest Lima; 2x25, 22 lit\n"
    again = stalwart_run("Oslo", "Lima", *codecs)  # replayed: the values read back whole
    assert (again.returncode, again.stdout) == (0, done.stdout)

    async def table() -> Any:
        async with sw.Runner(url) as runner:
            [run] = await runner.list_runs()
            steps = {s.name: s for s in await runner.steps(run.id)}
            return json.loads(steps["Load.exec"].output or "null")

    recorded = asyncio.run(table())
    assert recorded["$t"] == "codec" and recorded["c"] == "pandas.DataFrame"
