"""A PocketFlow program run by `stalwart.flow.program` (what `stalwart run` does),
in this process: its flows are durable runs named after the program, its
`shared` dict holds the results in place, and nothing it changed outlives it."""

from __future__ import annotations

import asyncio
import builtins
import getpass
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart.flow import Flow, Node
from stalwart.flow.program import Program, base_run_id, flow_run_id

# Each exec appends its node's name to the file named by COUNT, then the
# program prints what its flows returned and left in `shared`.
ESSAY = """
import asyncio
import json
import os
import sys

from pocketflow import AsyncFlow, AsyncNode, Flow, Node


def count(tag):
    with open(os.environ["COUNT"], "a") as f:
        f.write(tag + "\\n")


class Outline(Node):
    def prep(self, shared):
        return shared["topic"]

    def exec(self, topic):
        count("outline")
        return [f"{topic}, part {i}" for i in (1, 2)]

    def post(self, shared, prep_res, exec_res):
        shared["outline"] = exec_res
        return "write"


class Write(Node):
    def prep(self, shared):
        return shared["outline"]

    def exec(self, outline):
        count("write")
        return " / ".join(outline)

    def post(self, shared, prep_res, exec_res):
        shared["text"] = exec_res
        return "written"


class Polish(AsyncNode):
    async def prep_async(self, shared):
        return shared["text"]

    async def exec_async(self, text):
        count("polish")
        return text.upper()

    async def post_async(self, shared, prep_res, exec_res):
        shared["final"] = exec_res
        return "polished"


outline = Outline()
outline - "write" >> Write()
shared = {"topic": sys.argv[1]}
before = shared
action = Flow(start=outline).run(shared)
assert shared is before
second = {"text": shared["text"]}
last = asyncio.run(AsyncFlow(start=Polish()).run_async(second))
print(json.dumps({"actions": [action, last], "shared": shared, "second": second}))
"""


def write_program(folder: Path, text: str, name: str = "essay.py") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def run(
    path: Path, args: list[str], url: str, capsys: pytest.CaptureFixture[str], base: str = ""
) -> dict[str, Any]:
    Program(url, base or base_run_id(path, args)).execute(path, args)
    printed: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return printed


@pytest.fixture
def count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "count.txt"
    monkeypatch.setenv("COUNT", str(path))
    return path


def test_top_level_flows_are_durable_runs_named_after_the_program(
    tmp_path: Path, sqlite_url: str, count: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_program(tmp_path, ESSAY)
    printed = run(path, ["replay"], sqlite_url, capsys)
    base = base_run_id(path, ["replay"])
    assert printed["shared"]["text"] == "replay, part 1 / replay, part 2"

    async def runs() -> list[tuple[str, str, str]]:
        async with sw.Runner(sqlite_url) as runner:
            found = await runner.list_runs()
            return sorted((r.id, r.policy, r.status) for r in found)

    assert asyncio.run(runs()) == [
        (base, "Flow-Outline", "succeeded"),
        (f"{base}.2", "AsyncFlow-Polish", "succeeded"),
    ]


def test_flows_return_their_last_action_and_fill_the_callers_shared_in_place(
    tmp_path: Path, sqlite_url: str, count: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = run(write_program(tmp_path, ESSAY), ["replay"], sqlite_url, capsys)
    assert printed["actions"] == ["written", "polished"]
    assert printed["shared"] == {
        "topic": "replay",
        "outline": ["replay, part 1", "replay, part 2"],
        "text": "replay, part 1 / replay, part 2",
    }
    assert printed["second"]["final"] == "REPLAY, PART 1 / REPLAY, PART 2"


def test_the_same_command_again_replays_the_finished_flows_without_running_them(
    tmp_path: Path, sqlite_url: str, count: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_program(tmp_path, ESSAY)
    first = run(path, ["replay"], sqlite_url, capsys)
    again = run(path, ["replay"], sqlite_url, capsys)
    assert again == first
    assert count.read_text().split() == ["outline", "write", "polish"]
    other = run(path, ["other topic"], sqlite_url, capsys)  # other arguments: other runs
    assert other["shared"]["topic"] == "other topic"
    assert count.read_text().split() == ["outline", "write", "polish"] * 2


def test_a_given_run_id_names_the_first_flow_and_numbers_the_next(
    tmp_path: Path, sqlite_url: str, count: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(write_program(tmp_path, ESSAY), ["replay"], sqlite_url, capsys, base="essay-1")

    async def ids() -> list[str]:
        async with sw.Runner(sqlite_url) as runner:
            return sorted(r.id for r in await runner.list_runs())

    assert asyncio.run(ids()) == ["essay-1", "essay-1.2"]


def test_run_ids_derive_from_the_program_and_its_arguments_only(tmp_path: Path) -> None:
    path = tmp_path / "main.py"
    base = base_run_id(path, ["a", "b"])
    assert base.startswith("main-") and len(base) == len("main-") + 12
    assert base_run_id(tmp_path / "." / "main.py", ["a", "b"]) == base  # the same file
    assert base_run_id(path, ["a b"]) != base  # arguments are not joined ambiguously
    assert base_run_id(path, ["a", "b", ""]) != base
    assert base_run_id(tmp_path / "other" / "main.py", ["a", "b"]) != base
    assert [flow_run_id(base, n) for n in (1, 2, 3)] == [base, f"{base}.2", f"{base}.3"]


def test_a_run_id_no_run_may_have_is_refused_before_the_program_starts() -> None:
    with pytest.raises(ValueError, match="kept for child runs"):
        Program("sqlite:///x.db", "a~b")
    with pytest.raises(ValueError, match="at most 512"):
        Program("sqlite:///x.db", "x" * 511)  # its second flow would be x...x.2


def test_pocketflow_input_argv_and_path_are_the_programs_only_while_it_runs(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "helpers.py").write_text("GREETING = 'hello from a sibling module'\n")
    program = """
import builtins, json, sys
import pocketflow
import stalwart.flow
from helpers import GREETING
print(json.dumps({
    "served": pocketflow is stalwart.flow,
    "argv": sys.argv[1:],
    "greeting": GREETING,
    "input_replaced": builtins.input.__name__ != "input",
}))
"""
    path = write_program(tmp_path, program, "inspect_me.py")
    saved = (sys.modules.get("pocketflow"), builtins.input, getpass.getpass, sys.argv[:])
    printed = run(path, ["--flag", "x"], sqlite_url, capsys)
    assert printed == {
        "served": True,
        "argv": ["--flag", "x"],
        "greeting": "hello from a sibling module",
        "input_replaced": True,
    }
    assert (sys.modules.get("pocketflow"), builtins.input, getpass.getpass, sys.argv) == saved
    assert str(tmp_path) not in sys.path


def test_a_secret_typed_at_getpass_inside_a_flow_never_reaches_the_ledger(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    asked: list[str] = []

    def typed(prompt: str = "Password: ", stream: Any = None) -> str:
        asked.append(prompt)
        return "s3cret-token"

    monkeypatch.setattr(getpass, "getpass", typed)
    program = """
import getpass
from pocketflow import Flow, Node

class Login(Node):
    def exec(self, _):
        return len(getpass.getpass("Token: "))

    def post(self, shared, prep_res, exec_res):
        shared["length"] = exec_res

shared = {}
Flow(start=Login()).run(shared)
print(shared["length"])
"""
    path = write_program(tmp_path, program, "login.py")
    Program(sqlite_url, "login").execute(path, [])
    assert capsys.readouterr().out.strip() == "12"
    assert asked == ["Token: "]

    async def steps() -> dict[str, tuple[str, str | None, str | None]]:
        async with sw.Runner(sqlite_url) as runner:
            return {s.key: (s.name, s.args, s.output) for s in await runner.steps("login")}

    recorded = asyncio.run(steps())
    assert steps_named(recorded, "getpass") == []
    assert not any("s3cret-token" in str(step) for step in recorded.values())
    ledger = Path(sqlite_url.removeprefix("sqlite:///"))
    assert b"s3cret-token" not in b"".join(
        p.read_bytes() for p in ledger.parent.glob(ledger.name + "*")
    )


def steps_named(
    steps: dict[str, tuple[str, str | None, str | None]], name: str
) -> list[tuple[str, str | None, str | None]]:
    return [(key, args, output) for key, (n, args, output) in steps.items() if n == name]


def test_input_outside_any_run_is_asked_as_usual(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    answers = iter(["first", "second"])
    monkeypatch.setattr(builtins, "input", lambda prompt="": next(answers))
    program = "print(input('a? '), input('b? '))\n"
    Program(sqlite_url, "plain").execute(write_program(tmp_path, program, "plain.py"), [])
    assert capsys.readouterr().out.strip() == "first second"


class Double(Node):
    def prep(self, shared: dict[str, Any]) -> int:
        return int(shared["n"])

    def exec(self, n: int) -> int:
        return 2 * n

    def post(self, shared: dict[str, Any], prep_res: int, exec_res: int) -> str:
        shared["doubled"] = exec_res
        return "done"


async def test_runner_run_in_place_fills_the_callers_store_of_a_durable_run(
    sqlite_url: str,
) -> None:
    flow = Flow(start=Double())
    async with sw.Runner(sqlite_url) as runner:
        shared: dict[str, Any] = {"n": 21}
        returned = await runner.run(flow, shared=shared, run_id="in-place", in_place=True)
        assert returned is shared
        assert shared == {"n": 21, "doubled": 42}
        copy: dict[str, Any] = {"n": 4}
        result = await runner.run(flow, shared=copy, run_id="a-copy")
        assert copy == {"n": 4} and result == {"n": 4, "doubled": 8}  # the default: a copy


async def test_runner_run_in_place_refuses_what_has_no_store_before_running() -> None:
    @sw.policy
    async def plain(x: int) -> int:
        raise AssertionError("must not run")

    async with sw.Runner() as runner:
        with pytest.raises(TypeError, match="in_place=True is for flows"):
            await runner.run(plain, 1, in_place=True)
        with pytest.raises(TypeError, match="pass shared=a dict, not NoneType"):
            await runner.run(Flow(start=Double()), in_place=True)
