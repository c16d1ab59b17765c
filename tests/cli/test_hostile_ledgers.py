"""The CLI treats a ledger as data written by someone else.

Hostile rows are written with sqlite3 directly, as an adversary with access to
the file would: escape sequences meant to drive the reader's terminal, codec
tags and error types naming modules to import, a run whose policy names a
module. The commands run in a subprocess (a fresh interpreter, where an
import would show) or in-process with typer's CliRunner, and the tests check
what reached the terminal and that nothing was imported or executed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from typer.testing import Result

import stalwart as sw
from stalwart.core.redact import printable
from stalwart.stores.sqlite import SQLiteStore

from .conftest import invoke, run_cli

WIDE = {"COLUMNS": "250"}  # no table cut: every hostile character is shown

# An OSC that retitles the terminal, a CSI that clears it, a C1 CSI (no ESC),
# and rich markup that would close a tag nobody opened.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m[/]"
CONTROLS = ("\x1b", "\x07", "\x9b")

EVIL_APP = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")

def X(*args, **kwargs):
    pathlib.Path({marker!r} + ".called").write_text("called")
"""


# -- a ledger written by hand ----------------------------------------------------------
def _new_ledger(path: Path) -> str:
    url = f"sqlite:///{path}"

    async def create() -> None:
        store = SQLiteStore.from_url(url)
        await store.open()
        await store.close()

    asyncio.run(create())
    return url


def _insert_run(path: Path, run_id: str, **columns: Any) -> None:
    row = {
        "id": run_id,
        "policy": "app:main",
        "inputs": '{"args":[],"kwargs":{}}',
        "status": "succeeded",
        "created_at": time.time(),
        "updated_at": time.time(),
        **columns,
    }
    _insert(path, "runs", row)


def _insert_step(path: Path, run_id: str, key: str, **columns: Any) -> None:
    row = {
        "run_id": run_id,
        "key": key,
        "name": "tool",
        "kind": "call",
        "args_hash": "x",
        "args": '{"*":[]}',
        "attempts": 1,
        "started_at": time.time(),
        "finished_at": time.time(),
        **columns,
    }
    _insert(path, "steps", row)


def _insert(path: Path, table: str, row: dict[str, Any]) -> None:
    names = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    with sqlite3.connect(path) as db:
        db.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))
    db.close()


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module ``evil_mod`` importable from the current directory, that leaves
    a marker file when imported (and another when its ``X`` is called)."""
    (tmp_path / "evil_mod.py").write_text(EVIL_APP.format(marker=str(tmp_path / "imported")))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("evil_mod", None)


def _nothing_happened(folder: Path) -> None:
    assert not (folder / "imported").exists(), "evil_mod was imported"
    assert not (folder / "imported.called").exists()
    assert not (folder / "pwned").exists(), "os.system ran"
    assert not (folder / "pwned2").exists(), "os.system ran"
    assert "evil_mod" not in sys.modules


# -- terminal controls -----------------------------------------------------------------
def test_printable_escapes_terminal_controls_and_keeps_the_text() -> None:
    assert printable("plain text, ünïcode, 表") == "plain text, ünïcode, 表"
    assert printable("two\nlines\tand a tab") == "two\nlines\tand a tab"
    assert printable("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07"
    assert printable("\x1b[2J\x1b[31mred") == "\\x1b[2J\\x1b[31mred"
    assert printable("a\rb\x08c\x7fd\x00") == "a\\x0db\\x08c\\x7fd\\x00"
    assert printable("\x9b31m\x9d0;t\x9c") == "\\x9b31m\\x9d0;t\\x9c"  # C1: CSI, OSC, ST
    assert printable(printable(HOSTILE)) == printable(HOSTILE)  # escaping twice is a no-op
    assert not any(c in printable(HOSTILE) for c in CONTROLS)


def _hostile_ledger(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """Runs whose every field a reader sees holds HOSTILE: ids, policies,
    inputs, results, errors, step names, args, outputs, messages, signal names."""
    path = tmp_path / "runs.db"
    url = _new_ledger(path)
    ids = {kind: f"{kind}-{HOSTILE}" for kind in ("ok", "failed", "waiting", "raw")}
    text = json.dumps(HOSTILE)
    message = {
        "$t": "msg",
        "v": {
            "id": HOSTILE,
            "role": "assistant",
            "actor": HOSTILE,
            "call": {"id": HOSTILE, "name": HOSTILE, "arguments": {HOSTILE: HOSTILE}},
        },
    }
    answer = {
        "$t": "msg",
        "v": {"role": "user", "actor": HOSTILE, "parts": [{"type": "text", "text": HOSTILE}]},
    }
    _insert_run(
        path,
        ids["ok"],
        policy=f"app:{HOSTILE}",
        inputs=json.dumps({"args": [HOSTILE], "kwargs": {HOSTILE: HOSTILE}}),
        result=text,
        code_version=HOSTILE,
    )
    _insert_step(path, ids["ok"], "1", name=HOSTILE, args=json.dumps({"*": [HOSTILE]}), output=text)
    _insert_step(
        path,
        ids["ok"],
        f"2{HOSTILE}",
        name=HOSTILE,
        error=json.dumps({"type": HOSTILE, "message": HOSTILE}),
    )
    _insert_step(path, ids["ok"], "3", name="model", output=json.dumps([message, answer]))
    _insert_step(
        path, ids["ok"], "4", name=f"stalwart.signal:{HOSTILE}", kind="signal", output=text
    )
    _insert_run(
        path,
        ids["failed"],
        status="failed",
        error=json.dumps({"type": f"app.{HOSTILE}", "message": HOSTILE}),
    )
    _insert_run(
        path,
        ids["waiting"],
        status="suspended",
        waiting_for=HOSTILE,
        owner=HOSTILE,
        result=None,
    )
    _insert_run(path, ids["raw"], inputs=HOSTILE, result=HOSTILE, status=HOSTILE)  # not JSON
    return url, ids


def test_no_ledger_content_reaches_the_terminal_raw(tmp_path: Path) -> None:
    url, ids = _hostile_ledger(tmp_path)
    commands = [
        ["runs", "list"],
        ["runs", "list", "--status", "suspended"],
        *(["runs", "show", run_id] for run_id in ids.values()),
        ["runs", "show", ids["ok"], "--full"],
        ["runs", "show", f"missing-{HOSTILE}"],
        ["runs", "resume", ids["ok"]],
        ["runs", "resume", ids["failed"]],
        ["runs", "resume", ids["waiting"]],
        ["signal", ids["waiting"], HOSTILE, "1"],
        ["runs", "cancel", ids["waiting"]],
        ["runs", "cancel", ids["ok"]],
    ]
    for command in commands:
        result = invoke(*command, "--store", url)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            command,
            result.exception,
        )
        assert "Traceback" not in result.output
        for control in CONTROLS:
            assert control not in result.output, (command, result.output)
    # What was there is still shown, as text.
    shown = invoke("runs", "show", ids["ok"], "--store", url).output
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m[/]" in shown  # the result, markup included
    assert invoke("runs", "list", "--store", url).output.count("\\x1b]0;pwned") >= 4


def test_the_entry_point_writes_no_control_characters(tmp_path: Path) -> None:
    """The same through the installed command: nothing in between to filter."""
    url, ids = _hostile_ledger(tmp_path)
    for command in (["runs", "list"], ["runs", "show", ids["ok"]]):
        proc = run_cli(tmp_path, *command, "--store", url, env=WIDE)
        assert proc.returncode == 0, proc.stderr
        assert not any(c in proc.stdout + proc.stderr for c in CONTROLS), proc.stdout


# -- passwords in store URLs ----------------------------------------------------------
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_a_store_password_is_never_printed(store_url: str) -> None:
    # The test server trusts local connections: any password is accepted.
    parts = urlsplit(store_url)
    user, _, host = parts.netloc.rpartition("@")
    netloc = f"{user.partition(':')[0] or 'postgres'}:topsecret@{host}"
    url = urlunsplit(parts._replace(netloc=netloc))
    outputs = [
        invoke("runs", "list", "--store", url),  # "no runs in <url>"
        invoke("runs", "show", "nope", "--store", url),  # "no run 'nope' in <url>"
    ]

    async def one_run() -> None:
        async with sw.Runner(url, serving=False) as runner:
            await runner.run(_add, 1, 2, run_id="r1")

    asyncio.run(one_run())
    outputs.append(invoke("runs", "list", "--store", url))  # the table's title
    for result in outputs:
        assert "topsecret" not in result.output
        assert ":***@" in result.output
    assert "r1" in outputs[-1].output


@sw.policy
async def _add(a: int, b: int) -> int:
    return a + b


# -- runs show / list render stored JSON ------------------------------------------------
def test_show_and_list_never_import_or_call_what_a_row_names(evil: Path) -> None:
    path = evil / "runs.db"
    url = _new_ledger(path)
    touch = f"touch {evil / 'pwned'}"
    _insert_run(
        path,
        "hostile",
        policy="evil_mod:X",
        inputs=json.dumps(
            {
                "args": [{"$t": "dc", "c": "evil_mod:X", "v": {"cmd": touch}}],
                "kwargs": {"e": {"$t": "enum", "c": "os:system", "v": touch}},
            }
        ),
        result=json.dumps(
            {"$t": "model", "c": "evil_mod:X", "v": {"a": [1, {"$t": "tuple", "v": [2]}]}}
        ),
    )
    _insert_step(
        path,
        "hostile",
        "1",
        name="evil_mod:X",
        args=json.dumps({"*": [{"$t": "enum", "c": "evil_mod:X", "v": touch}]}),
        output=json.dumps({"$t": "enum", "c": "os:system", "v": touch}),
    )
    _insert_step(
        path,
        "hostile",
        "2",
        output=json.dumps([{"$t": "dc", "c": "evil_mod:X", "v": {"x": 1}}, {"$t": "nope", "v": 3}]),
    )
    touch2 = f"touch {evil / 'pwned2'}"
    error = {"type": "os.system", "message": touch2, "args": [touch2]}
    _insert_run(
        path, "hostile-failed", policy="evil_mod:X", status="failed", error=json.dumps(error)
    )
    _insert_step(path, "hostile-failed", "1", error=json.dumps({**error, "type": "evil_mod.X"}))

    shown = run_cli(evil, "runs", "show", "hostile", "--store", url, env=WIDE)
    assert shown.returncode == 0, shown.stderr
    # The stored JSON, readably: type names as text, fields as data.
    assert f'X(cmd="{touch}"), e=system("{touch}")' in shown.stdout
    assert "X(a=[1, [2]])" in shown.stdout
    assert f'system("{touch}")' in shown.stdout and "[X(x=1), nope(3)]" in shown.stdout
    failed = run_cli(evil, "runs", "show", "hostile-failed", "--store", url, env=WIDE)
    assert failed.returncode == 0, failed.stderr
    assert f"system: {touch2}" in failed.stdout and f"X: {touch2}" in failed.stdout
    listed = run_cli(evil, "runs", "list", "--store", url, env=WIDE)
    assert listed.returncode == 0 and "evil_mod:X" in listed.stdout
    for run_id in ("hostile", "hostile-failed"):
        assert invoke("runs", "show", run_id, "--store", url).exit_code == 0
    assert invoke("runs", "list", "--store", url).exit_code == 0
    _nothing_happened(evil)


# -- runs resume: only under a policy --app gives ----------------------------------------
APP = """
import stalwart as sw

@sw.policy
async def greet(ctx: sw.Context, name: str) -> str:
    answer = await ctx.wait_for("go")
    return f"hello {{name}}, {{answer}}"

@sw.policy
async def other(x: int) -> int:
    return x
"""


def test_resume_never_imports_the_policy_a_row_names(evil: Path) -> None:
    path = evil / "runs.db"
    url = _new_ledger(path)
    _insert_run(path, "hostile", policy="evil_mod:X", status="pending")
    (evil / "trust_app.py").write_text(APP.format())
    line = _error_line(invoke("runs", "resume", "hostile", "--store", url))
    assert line.startswith(
        "error: run 'hostile' needs policy 'evil_mod:X': "
        "give the module that defines it with --app MODULE"
    )
    for app_spec in ("trust_app", "trust_app.py", "trust_app:other"):
        line = _error_line(invoke("runs", "resume", "hostile", "--app", app_spec, "--store", url))
        assert line.startswith(
            f"error: run 'hostile' needs policy 'evil_mod:X', which --app '{app_spec}' did not "
            "provide (it provides: "
        )
    proc = run_cli(
        evil, "runs", "resume", "hostile", "--app", "trust_app", "--store", url, env=WIDE
    )
    assert proc.returncode == 1 and "needs policy 'evil_mod:X'" in proc.stderr
    assert "hostile" in invoke("signal", "hostile", "go", "1", "--store", url).output
    _nothing_happened(evil)
    assert _status(path, "hostile") == "pending"  # it stays put for a runner that has it
    sys.modules.pop("trust_app", None)


def test_resume_runs_a_policy_from_app(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "trust_app.py").write_text(APP.format())
    monkeypatch.syspath_prepend(str(tmp_path))
    import trust_app  # type: ignore[import-not-found]

    url = sqlite_url

    async def start() -> None:
        async with sw.Runner(url, serving=False) as runner:
            await runner.start(trust_app.greet, "ada", run_id="g1")
            while (await runner.get_run("g1")).status != "suspended":
                await asyncio.sleep(0.01)
            await runner.signal("g1", "go", "welcome")

    asyncio.run(start())
    out = invoke("runs", "resume", "g1", "--app", str(tmp_path / "trust_app.py"), "--store", url)
    assert out.exit_code == 0, out.output
    assert "resuming run g1 (greet)" in out.output
    assert "succeeded: hello ada, welcome" in out.output
    sys.modules.pop("trust_app", None)


CONTEXT_APP = """
import stalwart as sw

@sw.policy
async def a(x: int) -> int:
    return x

@sw.policy
async def b(x: int) -> int:
    return x

@sw.policy
async def c(x: int) -> int:
    return x

class App(sw.Context):
    b = b

BY_NAME = {"a": a, "c": c}
"""


@pytest.mark.parametrize(
    ("attr", "names"),
    [
        ("", {"a", "b", "c"}),
        (":App", {"b"}),
        (":BY_NAME", {"a", "c"}),
        (":a", {"a"}),
    ],
)
def test_app_collects_every_policy_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attr: str, names: set[str]
) -> None:
    from stalwart.cli.apps import app_policies

    (tmp_path / "ctx_app.py").write_text(CONTEXT_APP)
    monkeypatch.chdir(tmp_path)
    try:
        assert {p.name for p in app_policies(f"ctx_app{attr}")} == names
    finally:
        sys.modules.pop("ctx_app", None)


def test_a_worker_leaves_a_run_of_an_unknown_policy_alone(evil: Path) -> None:
    """The row naming evil_mod is skipped by every worker; the others run."""
    path = evil / "runs.db"
    url = _new_ledger(path)
    _insert_run(path, "hostile", policy="evil_mod:X", status="pending")
    (evil / "wapp.py").write_text(APP.format())
    proc = subprocess.Popen(
        [sys.executable, "-m", "stalwart.cli", "worker", "--store", url, "--app", "wapp"],
        cwd=evil,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "policies greet, other" in proc.stdout.readline()
        sys.path.insert(0, str(evil))
        import wapp  # type: ignore[import-not-found]

        async def use() -> int:
            async with sw.Runner(url, serving=False) as client:
                handle = await client.enqueue(wapp.other, 7, run_id="good")
                return int(await handle.result(timeout=20))

        assert asyncio.run(use()) == 7  # the worker is up and has claimed what it could
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
        sys.path.remove(str(evil))
        sys.modules.pop("wapp", None)
    assert proc.returncode == 0
    assert _status(path, "hostile") == "pending"
    _nothing_happened(evil)


def _error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _status(path: Path, run_id: str) -> str:
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
    db.close()
    return str(row[0])
