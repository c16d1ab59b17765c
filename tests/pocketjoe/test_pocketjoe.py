"""PocketJoe 0.1 programs on Stalwart: our own example written against its
API (``examples/pocketjoe_agent.py``), in memory, on SQLite, killed and
resumed; and what Stalwart's dispatch adds (allow-list, validation, errors
as results). PocketJoe's own README example and test suite are run from its
sdist by the opt-in ``test_upstream_readme.py`` and the last test here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stalwart.pocketjoe import (
    BaseContext,
    DurableRunner,
    InMemoryRunner,
    Message,
    Policy,
    get_policy_spec,
    policy_spec_mcp_tool,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pocketjoe_agent.py"
ANSWER = "Desk: According to train_times: Leeds to York: 09:12, 09:42 and 10:12"


def run_example(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PJ_LOG": str(tmp_path / "log")}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args], env=env, capture_output=True, text=True, timeout=60
    )


def executed(tmp_path: Path) -> list[str]:
    log = tmp_path / "log"
    return log.read_text().split() if log.exists() else []


def test_our_01_example_in_memory(tmp_path: Path) -> None:
    done = run_example(tmp_path)
    assert done.returncode == 0, done.stderr
    assert ANSWER in done.stdout
    assert executed(tmp_path) == ["llm", "timetable", "llm"]


def test_our_01_example_on_sqlite_answers_a_finished_run_from_the_ledger(
    tmp_path: Path, sqlite_url: str
) -> None:
    url = sqlite_url
    for _ in range(2):
        done = run_example(tmp_path, url)
        assert done.returncode == 0, done.stderr
        assert ANSWER in done.stdout
    # The second process executed nothing: the run was finished and recorded.
    assert executed(tmp_path) == ["llm", "timetable", "llm"]


def test_our_01_example_killed_during_the_lookup_resumes_without_asking_the_model_again(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    url = sqlite_url
    env = {**os.environ, "PJ_LOG": str(tmp_path / "log"), "RAIL_SLOW_LOOKUP": "60"}
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE), url], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while "timetable" not in executed(tmp_path):
            assert time.monotonic() < deadline, "the lookup never started"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe:
                pipe.close()
    resumed = run_example(tmp_path, url)
    assert resumed.returncode == 0, resumed.stderr
    assert ANSWER in resumed.stdout
    # The model's first answer came from the ledger; the lookup that was in
    # flight ran again (at least once, S3); the model answered once more.
    assert executed(tmp_path) == ["llm", "timetable", "timetable", "llm"]


# -- what Stalwart's dispatch adds ------------------------------------------


@policy_spec_mcp_tool(description="Adds two numbers")
class Add(Policy):
    async def __call__(self, a: int, b: int) -> list[Message]:
        """Add.
        :param a: first
        :param b: second
        """
        return [Message(actor="add", type="text", payload={"content": a + b})]


def scripted(*replies: list[Message]) -> type[Policy]:
    """A model that answers each turn from ``replies``, by the number of
    results it has seen (replay-safe: it reads only its observations)."""

    @policy_spec_mcp_tool(description="scripted model")
    class Model(Policy):
        async def __call__(self, observations: list[Message], options: list[str]) -> list[Message]:
            """A model.
            :param observations: history
            :param options: names
            """
            turn = sum(1 for m in observations if m.type == "action_result")
            return replies[min(turn, len(replies) - 1)]

    return Model


def call(name: str, args: object, tool_id: str = "t1") -> Message:
    return Message(
        actor="assistant",
        type="action_call",
        payload={"policy": name, "payload": args},
        tool_id=tool_id,
    )


def app(model: type[Policy], runner: InMemoryRunner) -> BaseContext:
    class App(BaseContext):
        def __init__(self, runner: InMemoryRunner) -> None:
            super().__init__(runner)
            self.llm = self._bind(model)
            self.add = self._bind(Add)

    return App(runner)


async def test_an_option_call_runs_validated_and_its_result_carries_the_tool_id() -> None:
    ctx = app(scripted([call("add", {"a": "2", "b": 3})]), InMemoryRunner())
    reply = await ctx.llm(observations=[], options=["add"])  # type: ignore[attr-defined]
    assert [m.type for m in reply] == ["action_call", "action_result"]
    assert reply[1].payload == {"content": 5}  # "2" coerced to the declared int
    assert reply[1].tool_id == "t1"


async def test_a_call_outside_the_offered_options_is_an_error_result_not_a_crash() -> None:
    ctx = app(scripted([call("add", {"a": 1, "b": 2}), call("nope", {}, "t2")]), InMemoryRunner())
    reply = await ctx.llm(observations=[], options=["add"])  # type: ignore[attr-defined]
    results = {m.tool_id: m.payload for m in reply if m.type == "action_result"}
    assert results["t1"] == {"content": 3}
    assert results["t2"]["error_type"] == "UnknownOption"


async def test_invalid_arguments_are_the_models_error_result() -> None:
    ctx = app(scripted([call("add", {"a": "x"})]), InMemoryRunner())
    reply = await ctx.llm(observations=[], options=["add"])  # type: ignore[attr-defined]
    assert reply[-1].payload["error_type"] == "InvalidArguments"


async def test_a_call_answered_inside_the_reply_is_not_run_again() -> None:
    answered = Message(actor="add", type="action_result", payload={"content": 0}, tool_id="t1")
    ctx = app(scripted([call("add", {"a": 1, "b": 2}), answered]), InMemoryRunner())
    reply = await ctx.llm(observations=[], options=["add"])  # type: ignore[attr-defined]
    assert [m.payload for m in reply if m.type == "action_result"] == [{"content": 0}]


def test_the_spec_schema_is_stalwarts_from_hints_and_docstring() -> None:
    spec = get_policy_spec(Add)
    assert spec.kind == "tool"
    assert spec.description == "Adds two numbers"
    assert spec.input_schema["required"] == ["a", "b"]
    assert spec.input_schema["properties"]["a"]["type"] == "integer"
    assert spec.input_schema["properties"]["a"]["description"] == "first"


async def test_a_durable_runner_records_each_decision_as_a_step(sqlite_url: str) -> None:
    runner = DurableRunner(sqlite_url)
    ctx = app(scripted([call("add", {"a": 1, "b": 2})]), runner)
    try:
        reply = await ctx.llm(observations=[], options=["add"])  # type: ignore[attr-defined]
        assert reply[-1].payload == {"content": 3}
        runs = await runner.runner.store.list_runs()
        assert len(runs) == 1
        steps = await runner.runner.store.load_steps(runs[0].id)
        assert {k: s.name for k, s in steps.items()} == {"1": "llm", "1#1.1": "add"}
    finally:
        await runner.close()


@pytest.mark.skipif(
    os.environ.get("STALWART_POCKETJOE") != "1",
    reason=(
        "opt-in (STALWART_POCKETJOE=1): fetches pocket-joe sdists from PyPI and runs their tests"
    ),
)
def test_pocketjoes_own_0_1_suite_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("upstream.py")), "0.1.0.1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
