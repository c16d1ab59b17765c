"""Exports keep a run's tags; an import checks them as a start would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import opened_store

from stalwart.core.errors import CorruptedRecord
from stalwart.core.ledger import RunRecord
from stalwart.core.tags import decode_tags, encode_tags
from stalwart.stores.base import Store
from stalwart.timetravel.export import export_runs, import_runs, read_export, write_export

GOLD = {"customer": "c-42", "tier": "gold"}


async def test_a_tagged_run_moves_between_stores_with_its_tags(
    any_store: Store, tmp_path: Path
) -> None:
    run = RunRecord("t-1", "echo", "{}", "succeeded", "null", tags=encode_tags(GOLD))
    await any_store.create_run(run)
    path = tmp_path / "runs.jsonl"
    with path.open("w", encoding="utf-8") as f:
        write_export(await export_runs(any_store, "t-1"), f)
    async for target in opened_store(f"sqlite:///{tmp_path / 'target.db'}"):
        assert await import_runs(target, read_export(path)) == ["t-1"]
        got = await target.get_run("t-1")
        assert got is not None and decode_tags(got.tags) == GOLD
        found = await target.list_runs(tags={"customer": "c-42"})
        assert [r.id for r in found] == ["t-1"]


@pytest.mark.parametrize(
    "tags",
    ['{"bad key":"v"}', '{"k":"line\\nbreak"}', '{"k":1}', '["k"]', "not json"],
)
def test_an_export_whose_tags_are_not_tags_is_refused_naming_the_field(
    tmp_path: Path, tags: str
) -> None:
    run = {"id": "r", "policy": "echo", "inputs": "{}", "status": "succeeded", "tags": tags}
    lines = [{"format": "stalwart.runs", "version": 1}, {"type": "run", "run": run}]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(CorruptedRecord, match=r"bad\.jsonl:2: .*"):
        read_export(path)
