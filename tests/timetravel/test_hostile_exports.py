"""Hostile export files and hostile recorded steps against export, import and fork.

The bar: an export file is data; a line that does not fit fails with the
file, the line and the field named, before anything is written; what a
file may put in a store is what the engine itself could have written
(``check_run_id``'s rules included).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from stalwart.core.errors import CorruptedRecord
from stalwart.stores import open_store
from stalwart.timetravel.export import import_runs, read_export

HEADER = {"format": "stalwart.runs", "version": 1}


def _run(run_id: str, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"id": run_id, "policy": "echo", "status": "succeeded"}
    record.update(inputs='{"args":["x"],"kwargs":{}}', result='"x"', created_at=1.0, updated_at=2.0)
    record.update(fields)
    return {"type": "run", "run": record}


def _step(run_id: str, key: str, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"key": key, "name": "tool", "args_hash": "h", "args": "{}"}
    record.update(output='"ok"', error=None, attempts=1, started_at=1.0, finished_at=1.5)
    record["kind"] = "call"
    record.update(fields)
    return {"type": "step", "run": run_id, "step": record}


def _file(tmp_path: Path, *lines: dict[str, Any] | str) -> Path:
    path = tmp_path / "hostile.jsonl"
    text = [line if isinstance(line, str) else json.dumps(line) for line in (HEADER, *lines)]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path


def _runs_in(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT id FROM runs ORDER BY id")]
    finally:
        con.close()


@pytest.mark.parametrize(
    "run_id",
    ["evil\x1b]0;pwned\x07\x1b[2J", "evil\x9b31m", "line\nbreak", "top~level-with-child-mark"],
)
def test_read_export_refuses_a_run_id_the_runtime_would_refuse(tmp_path: Path, run_id: str) -> None:
    """``check_run_id`` refuses control characters and ``~`` in a top-level
    run's id; an export file must not be a way around it (the id then reaches
    terminals, logs and child-id arithmetic)."""
    path = _file(tmp_path, _run(run_id))
    with pytest.raises(CorruptedRecord) as caught:
        read_export(path)
    assert f"{path}:2" in str(caught.value) and "id" in str(caught.value)


@pytest.mark.parametrize("field", ["created_at", "updated_at"])
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_read_export_refuses_non_finite_times(tmp_path: Path, field: str, value: str) -> None:
    """Python's json accepts NaN and Infinity; the export writer never emits
    them (allow_nan=False). Read back they become a store error that names no
    line (NaN: 'NOT NULL constraint failed') or a time no page can show."""
    line = json.dumps(_run("r1")).replace(f'"{field}": ', f'"{field}": {value}, "_was": ')
    path = _file(tmp_path, line)
    with pytest.raises(CorruptedRecord) as caught:
        read_export(path)
    assert f"{path}:2" in str(caught.value) and field in str(caught.value)


async def test_import_of_a_nan_time_names_the_line_and_writes_nothing(tmp_path: Path) -> None:
    """Today the first run is written, then the store fails on the second
    with SQLite's constraint message: a half-imported file, no line named."""
    db = tmp_path / "target.db"
    nan_run = json.dumps(_run("r2")).replace('"created_at": 1.0', '"created_at": NaN')
    path = _file(tmp_path, _run("r1"), nan_run)
    store = open_store(f"sqlite:///{db}")
    await store.open()
    try:
        with pytest.raises(CorruptedRecord) as caught:
            await import_runs(store, read_export(path))
    finally:
        await store.close()
    assert f"{path}:3" in str(caught.value)
    assert _runs_in(db) == []


def test_read_export_refuses_a_step_key_twice(tmp_path: Path) -> None:
    """Two records of one step: the store's primary key refuses the second,
    with a constraint message naming neither the file nor the line."""
    path = _file(tmp_path, _run("r1"), _step("r1", "1"), _step("r1", "1", output='"other"'))
    with pytest.raises(CorruptedRecord) as caught:
        read_export(path)
    assert f"{path}:4" in str(caught.value)
