"""Every benchmark workload runs at a tiny size, so the suite never rots.

No timing is asserted here; only that each workload does its job (B5 resumes
and re-executes at most one step, B7 holds no run in memory while waiting).
"""

from __future__ import annotations

from benchmarks.__main__ import main


def test_every_workload_runs_at_smoke_size() -> None:
    rows = main(["--smoke"])
    by = {(r["id"], r["subject"]): r for r in rows}
    assert {r["id"] for r in rows} == {"B1", "B2", "B4", "B5", "B7", "B8"}
    assert by[("B5", "stalwart sqlite")]["re_executed"]["max"] <= 1
    assert by[("B7", "stalwart sqlite")]["live_runs_held"]["max"] == 0
