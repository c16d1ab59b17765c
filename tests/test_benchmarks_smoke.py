"""Every benchmark workload runs at a tiny size, so the suite never rots.

No timing is asserted here; only that each Stalwart and floor workload does
its job (B5 resumes and re-executes at most one step, B7 holds no run in
memory while waiting) and that the report renders. PostgreSQL workloads skip
when the server is unreachable, except under CI. The peers (PocketFlow,
LangGraph, DBOS) are not needed: they come from benchmarks/requirements.txt,
and their smoke run is opt-in with STALWART_BENCH_PEERS=1.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from benchmarks.__main__ import main
from benchmarks._util import postgres_problem
from benchmarks.report import machine_info, render, versions
from benchmarks.suite import SPECS


def _check(rows: list[dict[str, Any]], allow_missing_peers: bool) -> None:
    pg_down = postgres_problem()
    errors = [
        f"{r['id']} {r['subject']}: {r.get('traceback') or r.get('reason')}"
        for r in rows
        if r["status"] == "error"
    ]
    assert not errors, "\n\n".join(errors)
    for r in rows:
        if r["status"] == "ok":
            continue
        reason = r.get("reason", "")
        if reason.startswith("not installed") and allow_missing_peers:
            continue
        assert pg_down is not None, f"{r['id']} {r['subject']}: {reason}"
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required under CI: {reason}")
    if pg_down is not None and any(r["status"] != "ok" for r in rows):
        pytest.skip(f"PostgreSQL workloads skipped: {pg_down}")


@pytest.mark.parametrize("wid", list(SPECS))
def test_stalwart_and_floor_workloads_run_at_smoke_size(wid: str) -> None:
    rows = main(["--smoke", wid, "--kinds", "stalwart,floor"])
    assert rows and {r["id"] for r in rows} == {wid}
    by = {r["subject"]: r for r in rows if r["status"] == "ok"}
    if wid == "B5":
        for row in by.values():
            assert row["stats"]["re_executed"]["max"] <= 1
    if wid == "B7":
        for row in by.values():
            assert row["stats"]["live_runs_held"]["max"] == 0
    if wid == "B10":  # both latencies, from another process, as percentiles
        for row in by.values():
            keys = {f"{w}_{p}_ms" for w in ("enqueue", "signal") for p in ("p50", "p99")}
            assert keys <= set(row["stats"])
    if wid == "B13":  # the fork asks the model for its suffix only
        calls = {s: r["stats"]["model_calls_per_case"]["max"] for s, r in by.items()}
        assert calls == {
            "floor: a fresh run of the case": 11,
            "stalwart sqlite counterfactual fork": 1,
        }
    meta = {**machine_info(), "seconds": 0.0, "load_after": os.getloadavg(), "versions": {}}
    assert f"## {wid}:" in render(rows, meta)
    _check(rows, allow_missing_peers=False)


@pytest.mark.skipif(not os.environ.get("STALWART_BENCH_PEERS"), reason="STALWART_BENCH_PEERS unset")
def test_peer_workloads_run_at_smoke_size() -> None:
    rows = main(["--smoke", "--kinds", "peer"])
    meta = {**machine_info(), "seconds": 0.0, "load_after": os.getloadavg(), "versions": versions()}
    render(rows, meta)
    _check(rows, allow_missing_peers=True)
