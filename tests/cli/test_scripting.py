"""The CLI for scripts: ``--json`` read back, filters and pages, counts, the
runs waiting for a human with what they ask, uncut piped tables, and resume,
signal and cancel for every kind of run.

Runs are real (a Runner on a temporary SQLite file); the commands run
in-process through typer's CliRunner, or as the installed entry point in a
subprocess whose stdout is a pipe.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.records import step_record

import stalwart as sw
from stalwart.core.ledger import RunRecord
from stalwart.stores.sqlite import SQLiteStore

from .conftest import RUN_FIELDS, invoke, ok, run_cli


def as_json(*args: str) -> Any:
    return json.loads(ok(*args, "--json"))


async def _suspended(runner: sw.Runner, *ids: str) -> None:
    for _ in range(500):
        runs = [await runner.get_run(i) for i in ids]
        if all(r.status == "suspended" for r in runs):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"runs did not suspend: {ids}")


# -- a small application ------------------------------------------------------------------
@sw.policy
async def double(x: int) -> int:
    return 2 * x


@sw.policy
async def refund(ctx: sw.Context, order: str, amount: int) -> str:
    first = await double(amount)
    ok = await ctx.wait_for("approve", about={"order": order, "amount": amount})
    return f"{order}: {first} {'refunded' if ok else 'refused'}"


@sw.policy
async def survey(ctx: sw.Context, customer: str) -> str:
    return str(await ctx.ask(f"How was it, {customer}?", signal="answer", about=[1, 2]))


@sw.policy
async def plain_wait(ctx: sw.Context) -> Any:
    return await ctx.wait_for("go")


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def make() -> None:
        async with sw.Runner(url) as runner:
            for i in range(7):
                assert await runner.run(double, i, run_id=f"batch-{i}") == 2 * i
            await runner.start(refund, "A-42", 120, run_id="refund-42")
            await _suspended(runner, "refund-42")
            await runner.start(survey, "Ada", run_id="survey-1")
            await _suspended(runner, "survey-1")
            await runner.start(plain_wait, run_id="plain-1")
            await _suspended(runner, "plain-1")
            await runner.enqueue(double, 100, run_id="queued-1", queue="slow")

    asyncio.run(make())
    return url


# -- --json ---------------------------------------------------------------------------------
def test_list_json_has_the_documented_fields_and_filters(db: str) -> None:
    doc = as_json("runs", "list", "--store", db)
    assert doc["store"] == db and doc["next"] is None
    assert len(doc["runs"]) == 11
    assert all(set(r) == RUN_FIELDS for r in doc["runs"])
    created = [r["created_at"] for r in doc["runs"]]
    assert created == sorted(created, reverse=True)  # newest first
    waiting = {r["id"]: r for r in doc["runs"] if r["status"] == "suspended"}
    assert waiting["refund-42"]["waiting_for"] == "approve"
    assert waiting["refund-42"]["policy"] == "refund"

    def ids(*filters: str) -> set[str]:
        return {r["id"] for r in as_json("runs", "list", *filters, "--store", db)["runs"]}

    assert ids("--status", "suspended") == {"refund-42", "survey-1", "plain-1"}
    assert ids("--policy", "refund") == {"refund-42"}
    assert ids("--queue", "slow") == {"queued-1"}
    assert ids("--id-contains", "batch-") == {f"batch-{i}" for i in range(7)}
    assert ids("--policy", "double", "--status", "succeeded", "--id-contains", "3") == {"batch-3"}


def test_list_pages_with_the_cursor_it_prints(db: str) -> None:
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        more = ["--before", cursor] if cursor else []
        doc = as_json("runs", "list", "--limit", "3", *more, "--store", db)
        seen += [r["id"] for r in doc["runs"]]
        pages += 1
        cursor = doc["next"]
        if cursor is None:
            break
    assert pages == 4 and len(seen) == 11 and len(set(seen)) == 11
    assert seen == [r["id"] for r in as_json("runs", "list", "--store", db)["runs"]]
    # The table says where the next page starts, as a flag to paste.
    assert "more: --before " in ok("runs", "list", "--limit", "3", "--store", db)
    bad = invoke("runs", "list", "--before", "soon", "--store", db)
    assert bad.exit_code == 2 and "cannot read the cursor 'soon'" in bad.stderr


def test_show_json_gives_recorded_values_as_parsed_json(db: str) -> None:
    doc = as_json("runs", "show", "refund-42", "--store", db)
    run = doc["run"]
    assert set(run) == RUN_FIELDS | {"inputs", "result", "error", "unreadable"}
    assert run["inputs"] == {"args": ["A-42", 120], "kwargs": {}}
    assert run["status"] == "suspended" and run["result"] is None and run["unreadable"] == []
    steps = {s["key"]: s for s in doc["steps"]}
    assert set(steps) == {"1", "2.0", "2"}
    assert steps["1"]["name"] == "double" and steps["1"]["output"] == 240
    assert steps["1"]["kind"] == "call" and steps["1"]["attempts"] == 1
    asked = steps["2.0"]
    assert (asked["name"], asked["kind"]) == ("stalwart.ask", "ask")
    assert asked["output"] == {
        "prompt": None,
        "signal": "approve",
        "about": {"order": "A-42", "amount": 120},
    }
    assert steps["2"]["name"] == "stalwart.deadline" and steps["2"]["output"] is None

    failed = as_json("runs", "show", "batch-1", "--store", db)["run"]
    assert failed["result"] == 2 and failed["error"] is None


def test_a_column_that_is_not_json_is_given_as_text_and_named(db: str, tmp_path: Path) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / "runs.db") as con:
        con.execute("UPDATE runs SET result = 'not json {' WHERE id = 'batch-2'")
    con.close()
    run = as_json("runs", "show", "batch-2", "--store", db)["run"]
    assert run["result"] == "not json {" and run["unreadable"] == ["result"]


def test_count_by_status_and_queue(db: str) -> None:
    doc = as_json("runs", "count", "--store", db)
    assert doc["total"] == 11
    assert doc["by_status"] == {
        "pending": 1,
        "running": 0,
        "suspended": 3,
        "succeeded": 7,
        "failed": 0,
        "cancelled": 0,
    }
    assert doc["by_queue"] == {"default": 10, "slow": 1}
    assert doc["counts"] == {
        "pending": {"slow": 1},
        "succeeded": {"default": 7},
        "suspended": {"default": 3},
    }
    assert as_json("runs", "count", "--queue", "slow", "--store", db)["total"] == 1
    assert (
        as_json("runs", "count", "--policy", "refund", "--store", db)["by_status"]["suspended"] == 1
    )
    table = ok("runs", "count", "--store", db)
    assert "11 runs in" in table
    rows = {line.split("│")[1].strip(): line for line in table.splitlines() if "│" in line}
    assert rows["slow"].split("│")[-2].strip() == "1"
    assert rows["all"].split("│")[-2].strip() == "11"


def test_waiting_lists_every_decision_oldest_first_with_what_it_asks(db: str) -> None:
    doc = as_json("runs", "waiting", "--store", db)
    runs = doc["runs"]
    assert [r["id"] for r in runs] == ["refund-42", "survey-1", "plain-1"]
    assert all(set(r) >= RUN_FIELDS for r in runs)
    refund_run, survey_run, plain = runs
    assert refund_run["signal"] == "approve" and refund_run["prompt"] is None
    assert refund_run["about"] == {"order": "A-42", "amount": 120}
    assert refund_run["deadline"] is None
    assert refund_run["waiting_since"] <= survey_run["waiting_since"]
    assert survey_run["signal"] == "answer"
    assert survey_run["prompt"] == "How was it, Ada?" and survey_run["about"] == [1, 2]
    assert plain["signal"] == "go" and plain["prompt"] is None and plain["about"] is None

    table = ok("runs", "waiting", "--store", db)
    assert "3 runs waiting for a signal" in table
    assert "How was it, Ada?" in table and '{"order": "A-42", "amount": 120}' in table


# -- piped tables ---------------------------------------------------------------------------
def test_a_piped_table_keeps_every_column_and_every_long_value(
    tmp_path: Path, sqlite_url: str
) -> None:
    url = sqlite_url
    long_id = "order-" + "x" * 150 + "-end"
    question = "Should we refund " + "the customer " * 15 + "in full?"

    @sw.policy(name="a_policy_with_a_rather_long_name_" + "y" * 40)
    async def asks(ctx: sw.Context) -> Any:
        return await ctx.ask(question, signal="decision")

    async def make() -> None:
        async with sw.Runner(url) as runner:
            await runner.start(asks, run_id=long_id)
            await _suspended(runner, long_id)

    asyncio.run(make())
    listed = run_cli(tmp_path, "runs", "list", "--store", url)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if long_id in line)
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[0] == long_id and cells[1] == asks.name and cells[2] == "suspended"
    assert cells[5] == "signal 'decision'"
    header = next(line for line in listed.stdout.splitlines() if "policy" in line)
    for name in ("id", "policy", "status", "created", "updated", "waiting for / wakes"):
        assert name in header
    assert "…" not in listed.stdout

    waiting = run_cli(tmp_path, "runs", "waiting", "--store", url)
    assert waiting.returncode == 0, waiting.stderr
    row = next(line for line in waiting.stdout.splitlines() if long_id in line)
    assert question in row and asks.name in row and "decision" in row
    assert "…" not in waiting.stdout


# -- what a wait records, and old ledgers -------------------------------------------------
def test_the_question_is_recorded_once_and_keys_stay_as_before(db: str) -> None:
    ok("signal", "refund-42", "approve", "true", "--store", db)
    out = ok("runs", "resume", "refund-42", "--app", __name__, "--store", db)
    assert "succeeded: A-42: 240 refunded" in out
    steps = as_json("runs", "show", "refund-42", "--store", db)["steps"]
    keys = [s["key"] for s in steps]
    assert sorted(keys) == ["1", "2", "2.0", "3"]
    assert [s["name"] for s in steps if s["key"] == "3"] == ["stalwart.signal:approve"]
    assert as_json("runs", "waiting", "--store", db)["runs"][0]["id"] == "survey-1"


def test_a_run_that_waited_before_waits_were_recorded_still_resumes(sqlite_url: str) -> None:
    """A ledger written by the code before this change: a deadline and no
    ``stalwart.ask`` record. Today's ``refund`` asks with ``about=``; the
    old run resumes, replays its steps and records no question after the fact."""
    url = sqlite_url
    from stalwart.runner.inputs import run_inputs

    async def old_ledger() -> None:
        store = SQLiteStore.from_url(url)
        await store.open()
        inputs = run_inputs(refund, "old-1", ("B-7", 5), {})
        await store.create_run(RunRecord("old-1", "refund", inputs, code_version="old"))
        claimed = await store.claim("old-1", "elsewhere:1:gone", 30.0)
        assert claimed is not None
        now = time.time()
        # The step `double(5)` as the engine recorded it then (same identity).
        from stalwart.core.engine.identity import identity_json, step_hash

        args = identity_json((5,), {}, "1")
        for step in (
            step_record(
                "1", "10", name="double", args_hash=step_hash(args), args=args, started_at=now
            ),
            step_record(
                "2",
                "null",
                name="stalwart.deadline",
                args_hash="",
                args=None,
                started_at=now,
                kind="deadline",
            ),
        ):
            await store.record_step("old-1", claimed.fence, step)
        await store.suspend_run("old-1", claimed.fence, None, "approve")
        await store.close()

    asyncio.run(old_ledger())
    waiting = as_json("runs", "waiting", "--store", url)["runs"]
    assert [(r["id"], r["prompt"], r["about"]) for r in waiting] == [("old-1", None, None)]
    ok("signal", "old-1", "approve", "false", "--store", url)
    out = ok("runs", "resume", "old-1", "--app", __name__, "--store", url)
    assert "succeeded: B-7: 10 refused" in out
    assert "↺ replayed  1" in out
    keys = sorted(s["key"] for s in as_json("runs", "show", "old-1", "--store", url)["steps"])
    assert keys == ["1", "2", "3"]  # nothing written at 2.0 after the fact


# -- resume, signal, cancel for every kind of run -----------------------------------------
KINDS_APP = '''
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.flow import AsyncFlow, AsyncNode
from stalwart.testing import ScriptedLLM, call


@sw.policy
async def function(ctx: sw.Context, n: int) -> int:
    return n + int(await ctx.wait_for("approve", about={"n": n}))


class Greeter:
    async def __call__(self, ctx: sw.Context, name: str) -> str:
        return f"hello {name}, " + str(await ctx.ask(f"greet {name}?", signal="ok"))


greeter = Greeter()


@sw.policy
async def human(ctx: sw.Context, question: str) -> str:
    """Ask a person.

    Args:
        question: What to ask.
    """
    return str(await ctx.ask(question, signal="answer"))


agent = llm.Agent(
    ScriptedLLM([call("human", question="which colour?"), "blue it is"], name="kinds_model"),
    instructions="Ask the human.",
    tools=[human],
    name="asker",
)


class Ask(AsyncNode):
    async def prep_async(self, shared: Any) -> Any:
        return shared["q"]

    async def exec_async(self, q: Any) -> Any:
        return await human(question=q)

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared["a"] = exec_res
        return None


class AskFlow(AsyncFlow):
    name = "ask_flow"


flow = AskFlow(Ask())
'''


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_resume_signal_and_cancel_work_for_every_kind_of_run(
    tmp_path: Path, sqlite_url: str
) -> None:
    app_file = tmp_path / "kinds_app.py"
    app_file.write_text(KINDS_APP)
    kinds = _load(app_file)
    url = sqlite_url
    started = {
        "fn-1": (kinds.function, (1,), {}),
        "class-1": (kinds.greeter, ("bob",), {}),
        "agent-1": (kinds.agent, ("q?",), {}),
        "flow-1": (kinds.flow, (), {"shared": {"q": "which flow?"}}),
        "cancel-me": (kinds.greeter, ("eve",), {}),
    }

    async def make() -> None:
        async with sw.Runner(url) as runner:
            for run_id, (target, args, kwargs) in started.items():
                await runner.start(target, *args, run_id=run_id, **kwargs)
            await _suspended(runner, *started)

    asyncio.run(make())
    waiting = {r["id"]: r for r in as_json("runs", "waiting", "--store", url)["runs"]}
    assert waiting["fn-1"]["about"] == {"n": 1}
    assert waiting["class-1"]["prompt"] == "greet bob?"
    assert waiting["agent-1"]["prompt"] == "which colour?"
    assert waiting["flow-1"]["prompt"] == "which flow?"

    payloads = {"fn-1": ("approve", "41"), "class-1": ("ok", '"hi"')}
    payloads |= {"agent-1": ("answer", '"blue"'), "flow-1": ("answer", '"a flow"')}
    for run_id, (name, payload) in payloads.items():
        out = ok("signal", run_id, name, payload, "--store", url)
        assert "This command does not execute it" in out
        assert f"stalwart runs resume {run_id} --app" in out
    # The signal only made them ready: nobody executed them.
    listed = {r["id"]: r["status"] for r in as_json("runs", "list", "--store", url)["runs"]}
    assert all(listed[i] == "pending" for i in payloads)

    outcomes = {
        "fn-1": "succeeded: 42",
        "class-1": "succeeded: hello bob, hi",
        "agent-1": "succeeded: blue it is",
        "flow-1": 'succeeded: {"q": "which flow?", "a": "a flow"}',
    }
    for run_id, expected in outcomes.items():
        result = run_cli(tmp_path, "runs", "resume", run_id, "--app", str(app_file), "--store", url)
        assert result.returncode == 0, result.stdout + result.stderr
        assert expected in result.stdout

    assert "cancelled run cancel-me" in ok("runs", "cancel", "cancel-me", "--store", url)
    final = {r["id"]: r["status"] for r in as_json("runs", "list", "--store", url)["runs"]}
    assert final == {**dict.fromkeys(outcomes, "succeeded"), "cancel-me": "cancelled"}


def test_resume_without_the_policy_says_how_to_fix_it(db: str, tmp_path: Path) -> None:
    ok("signal", "refund-42", "approve", "true", "--store", db)
    other = tmp_path / "other_app.py"
    other.write_text(
        "import stalwart as sw\n\n@sw.policy\nasync def unrelated() -> int:\n    return 1\n"
    )
    result = invoke("runs", "resume", "refund-42", "--app", str(other), "--store", db)
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert "needs policy 'refund'" in line and "it provides: unrelated" in line
    assert "module:attr" in line
    result = invoke("runs", "resume", "refund-42", "--store", db)
    assert result.exit_code == 1 and "--app MODULE" in result.stderr
