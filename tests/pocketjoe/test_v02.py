"""PocketJoe 0.2 programs on Stalwart (``stalwart.pocketjoe.v02``): our own
example written against PocketJoe 0.2's API (``examples/pocketjoe_v02_agent.py``)
in memory, on SQLite, killed and resumed; and what Stalwart's engine adds to
a bound policy (allow-list, validation, errors as results, replay-stable
ids). PocketJoe's own example programs run from its sdist, opt-in, in
``test_upstream_examples.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from stalwart.pocketjoe.v02 import (
    BaseContext,
    DurableRunner,
    InMemoryRunner,
    Message,
    MessageBuilder,
    OptionCallPayload,
    OptionResultPayload,
    OptionSchema,
    policy,
)

ROOT = Path(__file__).resolve().parents[2]
DESK = ROOT / "examples" / "pocketjoe_v02_agent.py"
ANSWER = "Desk: According to find_book: The Left Hand of Darkness (Le Guin): 2 copies, shelf B3"


def run(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DESK), *args],
        env={**os.environ, "PJ_LOG": str(where / "log")},
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )


def executed(where: Path) -> list[str]:
    log = where / "log"
    return log.read_text().split() if log.exists() else []


# -- our example, on PocketJoe 0.2's API ---------------------------------------------
def test_the_desk_example_answers_in_memory(tmp_path: Path) -> None:
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert ANSWER in done.stdout
    # The model asked for the catalogue, the lookup ran, the model answered.
    assert executed(tmp_path) == ["llm", "find_book", "llm"]


def test_the_desk_example_on_sqlite_answers_a_finished_run_from_the_ledger(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    url = sqlite_url
    for _ in range(2):
        done = run(tmp_path, url)
        assert done.returncode == 0, done.stderr
        assert ANSWER in done.stdout
    assert executed(tmp_path) == ["llm", "find_book", "llm"]  # the second run ran nothing


def test_the_desk_example_killed_during_the_lookup_resumes_without_asking_the_model_again(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    url = sqlite_url
    proc = subprocess.Popen(
        [sys.executable, str(DESK), url],
        env={**os.environ, "PJ_LOG": str(tmp_path / "log"), "DESK_SLOW_LOOKUP": "60"},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while "find_book" not in executed(tmp_path):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, f"the lookup never started: {executed(tmp_path)}"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    resumed = run(tmp_path, url)
    assert resumed.returncode == 0, resumed.stderr
    assert ANSWER in resumed.stdout
    # The model's first answer came from the ledger (the message ids it was
    # given too, so the rebuilt conversation matched its record); the lookup
    # in flight ran again (at least once, S3); the model answered once more.
    assert executed(tmp_path) == ["llm", "find_book", "find_book", "llm"]


# -- what the engine adds ----------------------------------------------------------------
@policy.tool(description="Adds two numbers")
async def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: first
        b: second
    """
    return a + b


@policy.tool(description="Fails")
async def broken() -> str:
    raise RuntimeError("the service is down")


class Weather(BaseModel):
    city: str
    celsius: int


@policy.tool(description="Current weather")
async def weather(city: str) -> Weather:
    return Weather(city=city, celsius=18)


def call(name: str, arguments: dict[str, Any], invocation_id: str = "t1") -> Message:
    payload = OptionCallPayload(invocation_id=invocation_id, option_name=name, arguments=arguments)
    return Message(policy="model", payload=payload)


def scripted(*replies: list[Message]) -> Any:
    """A model that answers each turn from ``replies``, by how many results
    it has seen (replay-safe: it reads only its observations)."""

    @policy.tool(description="scripted model")
    async def model(
        observations: list[Message], options: list[OptionSchema] | None = None
    ) -> list[Message]:
        turn = sum(1 for m in observations if isinstance(m.payload, OptionResultPayload))
        return replies[min(turn, len(replies) - 1)]

    return model


class App(BaseContext):
    def __init__(self, runner: Any, model: Any) -> None:
        super().__init__(runner)
        self.llm = self._bind(model)
        self.add = self._bind(add)
        self.broken = self._bind(broken)
        self.weather = self._bind(weather)


def results(reply: list[Message]) -> dict[str, OptionResultPayload]:
    return {
        m.payload.invocation_id: m.payload
        for m in reply
        if isinstance(m.payload, OptionResultPayload)
    }


async def test_an_option_call_runs_validated_and_answers_with_its_invocation_id() -> None:
    ctx = App(InMemoryRunner(), scripted([call("add", {"a": "2", "b": 3})]))
    reply = await ctx.llm(observations=[], options=OptionSchema.from_func([ctx.add]))
    assert isinstance(reply[0].payload, OptionCallPayload)
    assert results(reply)["t1"].result == 5  # "2" coerced to the declared int
    assert results(reply)["t1"].option_name == "add"


async def test_an_option_returning_a_model_gives_the_model_back_live_and_replayed(
    sqlite_url: str,
) -> None:
    url = sqlite_url
    for _ in range(2):  # the second time, every step is answered from the ledger
        runner = DurableRunner(url)
        ctx = App(runner, scripted([call("weather", {"city": "Paris"})]))
        try:
            reply = await ctx.llm(observations=[])
        finally:
            await runner.close()
        assert results(reply)["t1"].result == Weather(city="Paris", celsius=18)


async def test_unknown_options_bad_arguments_and_failures_are_error_results() -> None:
    model = scripted(
        [
            call("add", {"a": 1}, "missing"),
            call("nope", {}, "unknown"),
            call("broken", {}, "failing"),
        ]
    )
    ctx = App(InMemoryRunner(), model)
    reply = await ctx.llm(observations=[], options=OptionSchema.from_func([ctx.add, ctx.broken]))
    got = results(reply)
    assert got["missing"].is_error and got["missing"].error_type == "InvalidArguments"
    assert got["unknown"].error_type == "UnknownOption"
    assert got["failing"].error_type == "RuntimeError"
    assert got["failing"].error_message == "the service is down"
    # (PocketJoe raised, failing the whole program, for each of these.)
    only_add = await App(InMemoryRunner(), scripted([call("broken", {})])).llm(
        observations=[], options=OptionSchema.from_func([add])
    )
    assert results(only_add)["t1"].error_type == "UnknownOption"  # bound, but not offered


async def test_a_call_answered_inside_the_reply_is_not_run_again() -> None:
    answered = Message(
        policy="add",
        payload=OptionResultPayload(invocation_id="t1", option_name="add", result=0),
    )
    ctx = App(InMemoryRunner(), scripted([call("add", {"a": 1, "b": 2}), answered]))
    reply = await ctx.llm(observations=[])
    assert [p.result for p in results(reply).values()] == [0]
    assert len(reply) == 2


async def test_a_durable_runner_records_each_decision_and_option_as_a_step(sqlite_url: str) -> None:
    runner = DurableRunner(sqlite_url)
    ctx = App(runner, scripted([call("add", {"a": 1, "b": 2})]))
    try:
        reply = await ctx.llm(observations=[], options=OptionSchema.from_func([ctx.add]))
        assert results(reply)["t1"].result == 3
        runs = await runner.runner.store.list_runs()
        steps = await runner.runner.store.load_steps(runs[0].id)
        assert {k: s.name for k, s in steps.items()} == {"1": "model", "1#1.1": "add"}
    finally:
        await runner.close()


async def test_ids_made_inside_a_run_are_the_same_on_every_execution() -> None:
    @policy.tool(description="builds")
    async def build() -> list[str]:
        first = MessageBuilder(policy="user").add_text("a").to_message()
        second = MessageBuilder(policy="user").add_text("b").to_message()
        return [first.id, second.id]

    class Ctx(BaseContext):
        def __init__(self, runner: Any) -> None:
            super().__init__(runner)
            self.build = self._bind(build)

    ctx = Ctx(DurableRunner("memory"))
    once, again = await ctx.build(), await Ctx(DurableRunner("memory")).build()
    assert once == again and once[0] != once[1]  # per step and per id, not random
    outside = MessageBuilder(policy="user").add_text("x").to_message().id
    assert outside not in once  # outside a run: a random UUID


@pytest.mark.skipif(
    os.environ.get("STALWART_POCKETJOE") != "1",
    reason="opt-in (STALWART_POCKETJOE=1): fetches the pocket-joe sdist from PyPI",
)
def test_pocketjoes_own_0_2_suite_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("upstream.py")), "0.2.0.10"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "45 passed" in done.stdout
