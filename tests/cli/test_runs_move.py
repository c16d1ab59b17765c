"""``stalwart runs move``: a run moved shows as moved where it was; a target
out of reach, a finished run or an id the target holds is one line on
stderr, exit code 1, and both stores as they were."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.cli.conftest import invoke, ok
from tests.conftest import free_port, opened_store

from stalwart.core.ledger import RunRecord


def _make(url: str, *runs: RunRecord) -> None:
    async def go() -> None:
        async for store in opened_store(url):
            for run in runs:
                await store.create_run(run)

    asyncio.run(go())


def _status(url: str, run_id: str) -> str | None:
    async def go() -> str | None:
        async for store in opened_store(url):
            rec = await store.get_run(run_id)
            return None if rec is None else rec.status
        return None

    return asyncio.run(go())


def test_a_moved_run_is_listed_and_shown_as_moved_with_where_it_went(
    sqlite_url: str, tmp_path: Path
) -> None:
    target = f"sqlite:///{tmp_path / 'server.db'}"
    _make(sqlite_url, RunRecord("r1", "work", "{}"))
    out = ok("runs", "move", "r1", "--to", target, "--store", sqlite_url)
    assert out.startswith("moved r1 to sqlite:///") and "1 run(s) resumable there" in out
    listed = ok("runs", "list", "--store", sqlite_url)
    assert "moved" in listed and f"moved to {target}" in listed
    shown = ok("runs", "show", "r1", "--store", sqlite_url)
    assert "moved" in shown and "cancelled" not in shown
    assert _status(target, "r1") == "pending"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_unreachable_target_is_refused_and_the_run_stays(sqlite_url: str, kind: str) -> None:
    target = (
        "sqlite:////nonexistent-folder/deeper/server.db"
        if kind == "sqlite"
        else f"postgresql://mover:s3cret@127.0.0.1:{free_port()}/prod?retry_for=0.2"
    )
    _make(sqlite_url, RunRecord("r1", "work", "{}"))
    result = invoke("runs", "move", "r1", "--to", target, "--store", sqlite_url)
    assert result.exit_code == 1
    assert "cannot reach the target store" in result.stderr
    assert "nothing was moved" in result.stderr and "s3cret" not in result.stderr
    assert _status(sqlite_url, "r1") == "pending"


def test_a_finished_run_is_refused(sqlite_url: str, tmp_path: Path) -> None:
    _make(sqlite_url, RunRecord("done", "work", "{}", status="succeeded", result="1"))
    target = f"sqlite:///{tmp_path / 'server.db'}"
    result = invoke("runs", "move", "done", "--to", target, "--store", sqlite_url)
    assert result.exit_code == 1
    assert "run 'done'" in result.stderr and "has finished (succeeded)" in result.stderr
    assert _status(sqlite_url, "done") == "succeeded"
    assert _status(target, "done") is None
