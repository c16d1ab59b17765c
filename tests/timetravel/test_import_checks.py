"""What an export file may hold: every field of another type is an error naming
the file, the line and the field; a child run comes with its parent, or into
a store that has it, and an import that breaks either rule writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart.stores import open_store
from stalwart.timetravel import import_runs, read_export

HEADER = {"format": "stalwart.runs", "version": 1}
INPUTS = json.dumps({"args": [], "kwargs": {}})


def _file(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in (HEADER, *lines)))
    return path


def _run(run_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": "run", "run": {"id": run_id, "policy": "p", "inputs": INPUTS, **fields}}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"type": "step", "run": {"id": "a"}, "step": {}}, ":3: field 'run' of a 'step' line"),
        ({"type": "signal", "run": ["a"], "signal": {}}, ":3: field 'run' of a 'signal' line"),
        (_run("b", fence=True), ":3: run: field 'fence' holds bool, not int"),
        (_run("b", cancel_requested=1), ":3: run: field 'cancel_requested' holds int, not bool"),
        (_run("b", code_version=None), ":3: run: field 'code_version' holds null, not str"),
        (_run("b", wake_at="soon"), ":3: run: field 'wake_at' holds str, not int or float"),
        (_run("b", status="done"), ":3: run: field 'status' is 'done', not one of pending"),
        ({"type": "run", "run": {"id": "b", "policy": "p"}}, ":3: run: field 'inputs' is missing"),
    ],
)
def test_a_field_of_another_type_is_named_by_file_line_and_field(
    tmp_path: Path, line: dict[str, Any], message: str
) -> None:
    path = _file(tmp_path, _run("a"), line)
    with pytest.raises(sw.CorruptedRecord) as caught:
        read_export(path)
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)


def test_a_header_version_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps({"format": "stalwart.runs", "version": True}) + "\n")
    with pytest.raises(sw.CorruptedRecord, match=r":1: export version True"):
        read_export(path)


async def test_an_orphan_child_run_is_refused_and_nothing_is_written(
    store_url: str, tmp_path: Path
) -> None:
    path = _file(tmp_path, _run("fine"), _run("ghost~1", parent_id="ghost"))
    dumps = read_export(path)
    store = open_store(store_url)
    await store.open()
    try:
        with pytest.raises(sw.CorruptedRecord) as caught:
            await import_runs(store, dumps)
        message = str(caught.value)
        assert "run 'ghost~1' is a child run of 'ghost'" in message
        assert "neither in this export nor in the store" in message
        assert await store.get_run("fine") is None  # refused whole, before any insert
        assert await store.get_run("ghost~1") is None
        # With its parent in the file, or already in the store, it is imported.
        assert await import_runs(store, read_export(_file(tmp_path, _run("ghost")))) == ["ghost"]
        assert await import_runs(store, dumps) == ["fine", "ghost~1"]
    finally:
        await store.close()
