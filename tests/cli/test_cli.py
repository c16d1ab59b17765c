"""The ``stalwart`` command on real runs in a temporary SQLite file.

Runs are made through the Runner, as an application would make them; the
commands are invoked in-process with typer's CliRunner (they call
``asyncio.run`` themselves, so these tests are synchronous), and once through
the installed entry point in a subprocess.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import stalwart as sw
from stalwart.cli.render.steps import parent_key
from stalwart.cli.runs import parse_duration
from stalwart.core.ledger import RunRecord
from stalwart.stores.sqlite import SQLiteStore

from . import _agents
from .conftest import invoke, ok

TREE = "│├└─ "
APP = _agents.__name__  # resume takes the run's policy from --app, never from the row


def fails(*args: str, code: int = 1, env: dict[str, str | None] | None = None) -> str:
    """The error line of a command that must fail cleanly."""
    result = invoke(*args, env=env)
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


async def _make_runs(url: str) -> None:
    async with sw.Runner(url, serving=False) as runner:
        assert await runner.run(_agents.add, 2, 3, run_id="ok-1") == 5
        with pytest.raises(ValueError):
            await runner.run(_agents.failing, run_id="fail-1")
        await runner.start(_agents.approval, 5, run_id="wait-1")
        await runner.start(_agents.approval, 7, run_id="wait-2")
        await runner.start(_agents.napper, 3600.0, run_id="sleep-1")
        await runner.run(_agents.nested, run_id="nested-1")
        await runner.start(_agents.outer_wait, run_id="inner-1")
        await runner.run(_agents.agent, "what is python?", run_id="agent-1")
        for _ in range(200):  # the started runs park themselves
            runs = await runner.list_runs("suspended")
            if len(runs) == 4:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"runs did not suspend: {runs}")


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    asyncio.run(_make_runs(url))
    return url


def _record(url: str, run_id: str) -> RunRecord:
    async def get() -> RunRecord:
        async with sw.Runner(url, serving=False) as runner:
            return await runner.get_run(run_id)

    return asyncio.run(get())


# -- runs list ---------------------------------------------------------------------
def test_list_shows_every_run_with_status_and_what_it_waits_for(db: str) -> None:
    out = ok("runs", "list", "--store", db)
    assert "8 runs in" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    assert set(rows) == {
        "ok-1",
        "fail-1",
        "wait-1",
        "wait-2",
        "sleep-1",
        "nested-1",
        "inner-1",
        "agent-1",
    }
    assert "succeeded" in rows["ok-1"] and " add " in rows["ok-1"]
    assert "failed" in rows["fail-1"]
    assert "suspended" in rows["wait-1"] and "signal 'approve'" in rows["wait-1"]
    assert "suspended" in rows["sleep-1"] and "wakes" in rows["sleep-1"]
    assert "in 59m" in rows["sleep-1"] or "in 1h" in rows["sleep-1"]


def test_list_filters_by_status_and_limits(db: str) -> None:
    out = ok("runs", "list", "--status", "failed", "--store", db)
    assert "1 failed run in" in out and "fail-1" in out and "ok-1" not in out
    out = ok("runs", "list", "--status", "suspended", "--limit", "2", "--store", db)
    assert sum(1 for line in out.splitlines() if "suspended" in line and "│" in line) == 2
    out = ok("runs", "list", "--status", "cancelled", "--store", db)
    assert out.startswith("no cancelled runs")
    bad = invoke("runs", "list", "--status", "sleeping", "--store", db)
    assert bad.exit_code == 2


def test_store_comes_from_the_environment(db: str) -> None:
    result = invoke("runs", "list", env={"STALWART_STORE": db})
    assert result.exit_code == 0 and "ok-1" in result.stdout


def test_default_store_is_stalwart_db_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert "no store at 'stalwart.db'" in fails("runs", "list")
    asyncio.run(_make_runs("sqlite:///stalwart.db"))
    assert "ok-1" in ok("runs", "list")


# -- runs show ----------------------------------------------------------------------
def test_show_a_succeeded_run(db: str) -> None:
    out = ok("runs", "show", "ok-1", "--store", db)
    assert "run ok-1" in out
    assert "succeeded" in out
    assert "add" in out
    assert "code version" in out
    assert "inputs        2, 3" in out
    assert "result        5" in out
    assert "no recorded steps" in out


def test_show_a_failed_run_names_the_error_and_the_failed_step(db: str) -> None:
    out = ok("runs", "show", "fail-1", "--store", db)
    assert "error         ValueError: bad x 3" in out
    assert "2 recorded steps" in out
    assert "1  add(1, 2)" in out and "→ 3" in out
    assert "2  boom(3)" in out and "✗ ValueError: bad x 3" in out


def test_show_nests_steps_by_key(db: str) -> None:
    out = ok("runs", "show", "nested-1", "--store", db)
    lines = [line for line in out.splitlines() if "child(" in line]
    keys = [line.lstrip(TREE).split()[0] for line in lines]
    assert keys == ["1", "1.1", "2", "2.1"]  # in key order, each child under its parent
    indent = {
        key: len(line) - len(line.lstrip(TREE)) for key, line in zip(keys, lines, strict=True)
    }
    assert indent["1"] == indent["2"] < indent["1.1"] == indent["2.1"]
    assert "→ 11" in out and "→ 20" in out


def test_show_marks_a_parent_without_record(db: str) -> None:
    # inner_wait (step 1) is suspended inside, so only its child 1.1 is recorded.
    out = ok("runs", "show", "inner-1", "--store", db)
    assert "1  no record: in flight, or ended" in out
    assert "1.1  grandchild(4)" in out and "→ 40" in out
    assert "signal 'go'" in out


def test_show_renders_messages_readably(db: str) -> None:
    out = ok("runs", "show", "agent-1", "--store", db)
    # The run's result is the conversation: roles, actors, calls and results.
    assert "user: what is python?" in out
    assert 'assistant (model) → lookup(topic="python")' in out
    assert "tool (lookup) ← python is a snake" in out
    assert "tool (lookup) ← KeyError: 'nothing about that'" in out
    assert "assistant (model): Answer: python is a snake; cobra is a snake" in out
    # Steps: the model's turns, each with its calls dispatched under it (3#1...).
    for key in ("1", "1#1", "2", "2#1", "2#2", "3"):
        assert any(line.lstrip(TREE).startswith(f"{key}  ") for line in out.splitlines()), key
    assert "model([1 messages], options=[lookup])" in out
    assert "lookup(topic='missing')" in out and "✗ KeyError" in out


def test_show_full_does_not_shorten(db: str) -> None:
    long_question = "why " * 100
    url = db

    async def make() -> None:
        async with sw.Runner(url, serving=False) as runner:
            await runner.run(_agents.agent, long_question, run_id="long-1")

    asyncio.run(make())
    # The question shows in the header and in the result's first message.
    assert ok("runs", "show", "long-1", "--store", db).count("why") < 2 * 100
    assert ok("runs", "show", "long-1", "--full", "--store", db).count("why") >= 2 * 100


# -- runs cancel ----------------------------------------------------------------------
def test_cancel_a_waiting_run(db: str) -> None:
    assert "cancelled run wait-2" in ok("runs", "cancel", "wait-2", "--store", db)
    assert _record(db, "wait-2").status == "cancelled"
    assert "already cancelled" in ok("runs", "cancel", "wait-2", "--store", db)
    assert "cancelled" in ok("runs", "list", "--status", "cancelled", "--store", db)


def test_cancel_a_finished_run_fails(db: str) -> None:
    assert "already finished (succeeded)" in fails("runs", "cancel", "ok-1", "--store", db)


def test_cancel_a_run_held_elsewhere_is_a_request(db: str) -> None:
    async def hold() -> None:
        store = SQLiteStore.from_url(db)
        await store.open()
        await store.create_run(RunRecord("held-1", "x:y", '{"args":[],"kwargs":{}}'))
        assert await store.claim("held-1", _live_owner(), 60.0) is not None
        await store.close()

    asyncio.run(hold())
    out = ok("runs", "cancel", "held-1", "--store", db)
    assert "cancel requested" in out and "running" in out
    assert _record(db, "held-1").cancel_requested


# -- signal, resume ---------------------------------------------------------------------
def test_signal_wakes_a_waiting_run_and_resume_finishes_it(db: str) -> None:
    out = ok("signal", "wait-1", "approve", '{"k": 10}', "--store", db)
    assert "sent signal 'approve' to run wait-1" in out
    assert "was waiting for it and is ready" in out
    out = ok("runs", "resume", "wait-1", "--app", APP, "--store", db)
    assert "↺ replayed  1        add" in out
    assert "▶ ran live  4        add" in out
    assert 'succeeded: {"total": 16, "approved": {"k": 10}}' in out
    assert _record(db, "wait-1").status == "succeeded"
    # Resuming a finished run only reports its outcome.
    assert "succeeded" in ok("runs", "resume", "wait-1", "--store", db)


def test_signal_before_the_run_waits_is_queued(db: str) -> None:
    out = ok("signal", "wait-2", "later", "[1, 2]", "--store", db)
    assert "queued" in out and "'later'" in out
    assert _record(db, "wait-2").status == "suspended"


def test_resume_a_run_that_waits_for_a_signal_says_so(db: str) -> None:
    out = ok("runs", "resume", "wait-2", "--store", db)
    assert "waits for the signal 'approve'" in out
    assert "stalwart signal wait-2 approve JSON" in out


def test_resume_waits_out_a_durable_sleep(sqlite_url: str) -> None:
    url = sqlite_url

    async def make() -> None:
        async with sw.Runner(url, serving=False, inline_sleep=0.0) as runner:
            await runner.start(_agents.napper, 1.2, run_id="nap-1")
            while (await runner.get_run("nap-1")).status != "suspended":
                await asyncio.sleep(0.01)

    asyncio.run(make())
    out = ok("runs", "resume", "nap-1", "--app", APP, "--store", url)
    assert "sleeping" in out
    assert "↺ replayed  1" in out and "▶ ran live  3" in out
    assert "succeeded: 3" in out


def test_resume_a_run_abandoned_by_a_dead_process(db: str) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead_owner = f"{socket.gethostname()}:{int(dead.stdout)}:gone"

    async def abandon() -> None:
        async with sw.Runner(db, serving=False) as runner:
            await runner.signal("wait-1", "approve", {"k": 1})
        store = SQLiteStore.from_url(db)
        await store.open()
        assert await store.claim("wait-1", dead_owner, 60.0) is not None
        await store.close()

    asyncio.run(abandon())
    rec = _record(db, "wait-1")
    assert rec.status == "running" and rec.owner == dead_owner
    out = ok("runs", "resume", "wait-1", "--app", APP, "--store", db)
    assert "↺ replayed  1" in out and "▶ ran live  4" in out
    assert '"total": 7' in out


def test_resume_a_failed_run_exits_non_zero(db: str) -> None:
    result = invoke("runs", "resume", "fail-1", "--store", db)
    assert result.exit_code == 1
    assert "failed: ValueError: bad x 3" in result.stdout


def test_resume_a_run_held_by_a_live_process_fails(db: str) -> None:
    async def hold() -> None:
        async with sw.Runner(db, serving=False) as runner:
            await runner.signal("wait-1", "approve", {"k": 1})
        store = SQLiteStore.from_url(db)
        await store.open()
        assert await store.claim("wait-1", _live_owner(), 60.0) is not None
        await store.close()

    asyncio.run(hold())
    assert "is being executed by" in fails("runs", "resume", "wait-1", "--app", APP, "--store", db)


def test_resume_imports_the_app_first(db: str, tmp_path: Path) -> None:
    app_file = tmp_path / "myapp.py"
    app_file.write_text("IMPORTED = True\n")
    out = ok("runs", "resume", "wait-2", "--app", str(app_file), "--store", db)
    assert "waits for the signal" in out
    assert sys.modules["myapp"].IMPORTED


# -- prune --------------------------------------------------------------------------------
def test_prune_by_count_and_age(db: str) -> None:
    assert "pruned 0 finished runs" in ok("runs", "prune", "--older-than", "1d", "--store", db)
    assert "pruned 3 finished runs" in ok("runs", "prune", "--keep", "1", "--store", db)
    left = ok("runs", "list", "--store", db)
    assert "4 runs" not in left and "5 runs in" in left  # 4 suspended + the newest finished
    assert "agent-1" in left and "ok-1" not in left
    assert "pruned 1 finished run\n" in ok("runs", "prune", "--older-than", "0s", "--store", db)


def test_prune_needs_a_criterion_and_a_readable_duration(db: str) -> None:
    assert "--older-than" in fails("runs", "prune", "--store", db, code=2)
    assert "cannot read the duration '3x'" in fails(
        "runs", "prune", "--older-than", "3x", "--store", db, code=2
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("7d", 7 * 86400),
        ("12h", 43200),
        ("30m", 1800),
        ("45s", 45),
        ("2w", 1209600),
        ("1h30m", 5400),
        ("1.5h", 5400),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_parent_keys() -> None:
    assert parent_key("1") == ""
    assert parent_key("1.2") == "1"
    assert parent_key("3#1") == "3"
    assert parent_key("3#1.2") == "3#1"
    assert parent_key("1@2.1") == "1@2"
    assert parent_key("1@2") == "1"


# -- errors -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        ["runs", "show", "nope"],
        ["runs", "cancel", "nope"],
        ["runs", "resume", "nope"],
        ["signal", "nope", "approve", "{}"],
    ],
)
def test_an_unknown_run_is_a_clear_error(db: str, command: list[str]) -> None:
    line = fails(*command, "--store", db)
    assert line == f"error: no run 'nope' in {db}"


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ("mysql://db/x", "unknown store URL 'mysql://db/x'"),
        ("memory", "keeps runs in memory only"),
        ("sqlite:///", "no file in SQLite URL"),
        ("sqlite:///x.db?durability=sometimes", "durability must be"),
    ],
)
def test_a_bad_store_url_is_a_clear_error(store: str, message: str) -> None:
    assert message in fails("runs", "list", "--store", store)


def test_a_missing_or_broken_store_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    assert "no store at" in fails("runs", "list", "--store", f"sqlite:///{missing}")
    assert not missing.exists()  # inspecting does not create a ledger
    broken = tmp_path / "broken.db"
    broken.write_text("this is not a database, and it is long enough to be read as a header\n")
    assert "file is not a database" in fails("runs", "show", "x", "--store", f"sqlite:///{broken}")


def test_a_bad_json_payload_is_a_clear_error(db: str) -> None:
    line = fails("signal", "wait-1", "approve", "{k: 1}", "--store", db, code=2)
    assert "not valid JSON" in line
    assert _record(db, "wait-1").status == "suspended"


def test_a_signal_to_a_finished_run_is_a_clear_error(db: str) -> None:
    assert "has finished (succeeded)" in fails("signal", "ok-1", "approve", "1", "--store", db)


def test_a_missing_app_is_a_clear_error(db: str, tmp_path: Path) -> None:
    assert "cannot import the app module 'no_such_app'" in fails(
        "runs", "resume", "wait-2", "--app", "no_such_app", "--store", db
    )
    assert "no such file" in fails(
        "runs", "resume", "wait-2", "--app", str(tmp_path / "nope.py"), "--store", db
    )
    broken = tmp_path / "broken_app.py"
    broken.write_text("raise RuntimeError('kaboom')\n")
    assert "RuntimeError: kaboom" in fails(
        "runs", "resume", "wait-2", "--app", str(broken), "--store", db
    )


@pytest.mark.parametrize(
    "policy", ["no_such_module:fn", "json:dumps", "__main__:agent", "just_a_name"]
)
def test_a_policy_app_does_not_provide_is_a_clear_error(db: str, policy: str) -> None:
    async def make() -> None:
        store = SQLiteStore.from_url(db)
        await store.open()
        await store.create_run(RunRecord("orphan-1", policy, '{"args":[],"kwargs":{}}'))
        await store.close()

    asyncio.run(make())
    line = fails("runs", "resume", "orphan-1", "--app", APP, "--store", db)
    assert line.startswith(
        f"error: run 'orphan-1' needs policy {policy!r}, which --app {APP!r} did not provide "
    )
    assert "(it provides: add, agent, approval," in line  # what it has, and how to fix it
    assert "module:attr" in line
    assert "--app MODULE" in fails("runs", "resume", "orphan-1", "--store", db)


# -- the entry point ---------------------------------------------------------------------
def test_entry_point_runs_and_import_stalwart_stays_free_of_the_cli(db: str) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "stalwart.cli", "runs", "show", "nope", "--store", db],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: no run 'nope' in {db}"
    probe = (
        "import sys, stalwart; "
        "print(sorted(m for m in ('typer', 'rich', 'stalwart.cli', 'stalwart.demo') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _live_owner() -> str:
    """An owner that is judged alive: this very process."""
    return f"{socket.gethostname()}:{os.getpid()}:other"


@pytest.fixture(autouse=True)
def _no_stray_modules() -> Iterator[None]:
    yield
    sys.modules.pop("myapp", None)
