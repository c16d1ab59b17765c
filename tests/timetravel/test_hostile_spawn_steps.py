"""Export ``--children`` and fork over a run whose recorded spawn steps are hostile.

A spawn step's output is the list of child ids it started. Both export and
fork read it back with a bare ``json.loads`` and trust what it names: text
that is not JSON, or JSON that is not a list, escapes as a raw
JSONDecodeError/TypeError instead of a CorruptedRecord naming the run and
step; and an id that is not a child of the run (not ``<run>~…``) pulls an
unrelated run's whole ledger into the export.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.hostile import write_row

import stalwart as sw
from stalwart.core.errors import CorruptedRecord
from stalwart.timetravel import fork
from stalwart.timetravel.export import export_runs


@sw.policy
async def echo(text: str) -> str:
    return text


SPAWN_ROW = (
    "INSERT INTO steps (run_id, key, name, kind, args_hash, args, output, error,"
    " attempts, started_at, finished_at, spilled)"
    " VALUES (?, ?, ?, 'call', 'h', NULL, ?, NULL, 1, 1.0, 1.5, 0)"
)


async def _store_with_spawn(tmp_path: Path, output: str) -> str:
    url = f"sqlite:///{tmp_path / 'fork.db'}"
    async with sw.Runner(url, policies=[echo]) as r:
        await r.run(echo, "secret of another tenant", run_id="victim")
        await r.run(echo, "mine", run_id="parent")
    write_row(url, SPAWN_ROW, "parent", "1", "stalwart.spawn:echo", output)
    return url


async def test_export_children_names_a_spawn_record_that_is_not_json(tmp_path: Path) -> None:
    url = await _store_with_spawn(tmp_path, "not json")
    async with sw.Runner(url, policies=[echo]) as r:
        with pytest.raises(CorruptedRecord) as caught:
            await export_runs(r.store, "parent", children=True)
    assert "parent" in str(caught.value)


@pytest.mark.parametrize("output", ["5", "null", '{"a": 1}'])
async def test_fork_names_a_spawn_record_that_is_not_a_list(tmp_path: Path, output: str) -> None:
    url = await _store_with_spawn(tmp_path, output)
    async with sw.Runner(url, policies=[echo]) as r:
        with pytest.raises(CorruptedRecord) as caught:
            await fork(r, "parent", at="2", new_run_id="parent-b")
        assert await r.store.get_run("parent-b") is None
    assert "parent" in str(caught.value)


async def test_export_children_does_not_pull_in_an_unrelated_run(tmp_path: Path) -> None:
    """A spawn record naming ``victim`` (not ``parent~…``) must not put
    victim's inputs and result into parent's export."""
    url = await _store_with_spawn(tmp_path, '["victim"]')
    async with sw.Runner(url, policies=[echo]) as r:
        dumps = await export_runs(r.store, "parent", children=True)
    assert [d.run.id for d in dumps] == ["parent"]
