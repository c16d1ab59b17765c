"""The claim starvation of tests/review7/test_pg_claim_attacks.py on SQLite:
the same shape (ready runs read ``2 * limit`` at a time, ``accept`` asked
after), the same run left behind. A real SQLite file."""

from __future__ import annotations

from pathlib import Path

from stalwart.core.ledger import RunRecord
from stalwart.stores.sqlite import SQLiteStore


async def test_a_worker_refusing_most_runs_still_gets_the_one_it_can_run(tmp_path: Path) -> None:
    store = SQLiteStore.from_url(f"sqlite:///{tmp_path / 'c.db'}")
    await store.open()
    try:
        await store.create_runs([RunRecord(f"a{i}", "theirs", "{}", priority=5) for i in range(6)])
        await store.create_runs([RunRecord("mine", "mine", "{}")])
        got = await store.claim_due("w:1:a", 60, 1, lambda r: r.policy == "mine", policies=["mine"])
        assert [r.id for r in got] == ["mine"]
    finally:
        await store.close()
