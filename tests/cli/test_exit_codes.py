"""Every command that fails says so in one line on stderr and exits non-zero
(2 for a usage error), run as a real process: `python -m stalwart ...`.

A script chains commands with `&&` and `set -e`: a failure reported on the
screen with exit status 0 lets the next command run on a broken state.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

import stalwart as sw

from .conftest import run_cli

APP = """
import stalwart as sw


@sw.policy
async def fetch(n: int) -> list[str]:
    return [f"page {n}"]


@sw.policy
async def pipeline(ctx: sw.Context, topic: str) -> str:
    a = await ctx.call(fetch, 1)
    b = await ctx.call(fetch, 2)
    if b == ["boom"]:
        raise RuntimeError("the page is gone")
    return f"{topic}: {a[0]} + {b[0]}"


@sw.policy
async def broken(x: int) -> int:
    raise ValueError("no")
"""

EMPTY_APP = "X = 1\n"

HEADER = json.dumps({"format": "stalwart.runs", "version": 1})
RUN = {"policy": "pipeline", "inputs": json.dumps({"args": ["t"], "kwargs": {}})}


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the app, bad export files, and a store holding a
    succeeded run ``orig`` and a failed run ``bad``."""
    folder = tmp_path_factory.mktemp("exit-codes")
    (folder / "app.py").write_text(APP)
    (folder / "empty_app.py").write_text(EMPTY_APP)
    object_ref = {"type": "step", "run": {"id": "a"}, "step": {}}
    (folder / "object-ref.jsonl").write_text(
        "\n".join([HEADER, json.dumps({"type": "run", "run": {"id": "a", **RUN}})])
        + "\n"
        + json.dumps(object_ref)
        + "\n"
    )
    orphan = {"type": "run", "run": {"id": "ghost~1", "parent_id": "ghost", **RUN}}
    (folder / "orphan.jsonl").write_text(HEADER + "\n" + json.dumps(orphan) + "\n")
    sys.path.insert(0, str(folder))
    try:
        import app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(folder))

    async def make() -> None:
        async with sw.Runner(f"sqlite:///{folder / 'ledger.db'}") as runner:
            await runner.run(app.pipeline, "t", run_id="orig")
            with pytest.raises(ValueError, match="no"):
                await runner.run(app.broken, 1, run_id="bad")

    asyncio.run(make())
    sys.modules.pop("app", None)
    return folder


FAILURES: list[tuple[str, list[str], int, str]] = [
    (
        "a fork that fails as it runs",
        ["runs", "fork", "orig", "--app", "app.py", "--at", "2", "--result", '["boom"]'],
        1,
        "failed: RuntimeError: the page is gone",
    ),
    (
        "a fork at a step the run does not have",
        ["runs", "fork", "orig", "--app", "app.py", "--at", "99"],
        1,
        "run 'orig' has no step '99'",
    ),
    (
        "a fork's new result at a step the run does not have",
        ["runs", "fork", "orig", "--app", "app.py", "--at", "99", "--result", '["x"]'],
        1,
        "run 'orig' has no step '99'",
    ),
    (
        "a fork's new result of another shape",
        ["runs", "fork", "orig", "--app", "app.py", "--at", "2", "--result", '"x"'],
        1,
        "the new result is a string, but the step recorded a list of strings",
    ),
    (
        "a fork's new result that is not JSON",
        ["runs", "fork", "orig", "--app", "app.py", "--at", "2", "--result", "x"],
        2,
        "--result is not JSON",
    ),
    (
        "a fork's new result without --at",
        ["runs", "fork", "orig", "--app", "app.py", "--result", '"x"'],
        2,
        "--result needs --at",
    ),
    (
        "a fork under a taken id",
        ["runs", "fork", "orig", "--app", "app.py", "--at", "2", "--new-run-id", "orig"],
        1,
        "run 'orig' exists",
    ),
    (
        "an import whose line names its run with an object",
        ["runs", "import", "object-ref.jsonl"],
        1,
        "object-ref.jsonl:3: field 'run' of a 'step' line holds dict",
    ),
    (
        "an import of an orphan child run",
        ["runs", "import", "orphan.jsonl"],
        1,
        "run 'ghost~1' is a child run of 'ghost'",
    ),
    ("an import of a missing file", ["runs", "import", "nowhere.jsonl"], 1, "cannot read"),
    ("an export of an unknown run", ["runs", "export", "nope"], 1, "no run 'nope'"),
    ("showing an unknown run", ["runs", "show", "nope"], 1, "no run 'nope'"),
    ("cancelling a finished run", ["runs", "cancel", "orig"], 1, "has already finished"),
    ("resuming a failed run", ["runs", "resume", "bad", "--app", "app.py"], 1, ""),
    ("pruning without a criterion", ["runs", "prune"], 2, "say what to prune"),
    (
        "running a program that does not exist",
        ["run", "nowhere.py"],
        2,
        "cannot run the program 'nowhere.py': no such file",
    ),
    (
        "running a program under a run id no run may have",
        ["run", "app.py", "--run-id", "a~b"],
        2,
        "--run-id 'a~b': run id 'a~b' contains '~'",
    ),
    ("running a program on a memory store", ["run", "app.py", "--store", "memory"], 1, "memory"),
    ("a signal whose payload is not JSON", ["signal", "orig", "go", "{"], 2, "not valid JSON"),
    ("a signal to an unknown run", ["signal", "nope", "go", "1"], 1, "no run 'nope'"),
    ("pausing an unknown schedule", ["schedules", "pause", "nope"], 1, "nope"),
    ("a worker without --app", ["worker"], 2, "stalwart worker needs --app MODULE"),
    (
        "a worker whose --app provides no policy",
        ["worker", "--app", "empty_app.py"],
        2,
        "provides no policy",
    ),
    (
        "an MCP server whose app cannot be imported",
        ["mcp", "serve", "--app", "no_such_module"],
        1,
        "cannot import the app module 'no_such_module'",
    ),
    (
        "listing a store that does not exist",
        ["runs", "list", "--store", "sqlite:///missing.db"],
        1,
        "no store at",
    ),
    ("counting in a memory store", ["runs", "count", "--store", "memory"], 1, "in memory only"),
]


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [pytest.param(argv, code, says, id=what) for what, argv, code, says in FAILURES],
)
def test_a_failing_command_exits_non_zero_with_one_line(
    place: Path, argv: list[str], code: int, says: str
) -> None:
    store = {"STALWART_STORE": f"sqlite:///{place / 'ledger.db'}"}
    done = run_cli(place, *argv, env=store)  # a worker that serves for ever fails at 60 s
    shown = f"stdout: {done.stdout}\nstderr: {done.stderr}"
    assert done.returncode == code, shown
    assert "Traceback" not in done.stderr, shown
    if says:
        assert says in " ".join(done.stderr.split()), shown  # rich may wrap the line
        assert done.stderr.lstrip().startswith("error:"), shown
