"""The API behind several processes: two ``stalwart serve`` (enqueue only)
and one ``stalwart worker`` sharing one PostgreSQL."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from subprocess import Popen

import pytest
from tests.conftest import drop_schema, pg_schema_url, require_postgres

from .conftest import read_events, serving_many, wait_status


@pytest.fixture
def pg_store() -> Iterator[str]:
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_schema_url(schema)
    drop_schema(schema)


def test_two_api_processes_and_one_worker_share_the_runs(
    pg_store: str, worker: Callable[[str], Popen[str]]
) -> None:
    with contextlib.ExitStack() as stack:
        worker(pg_store)
        a, b = stack.enter_context(serving_many(pg_store, count=2))
        ca, cb = stack.enter_context(a.client()), stack.enter_context(b.client())

        body = {"inputs": {"n": 2}, "run_id": "pg-steps"}
        assert ca.post("/policies/stepper/runs", json=body).status_code == 201
        assert cb.post("/policies/stepper/runs", json=body).status_code == 200  # one run
        wait_status(cb, "pg-steps", "suspended")
        assert ca.post("/runs/pg-steps/signals/go", json=None).status_code == 202
        with cb.stream("GET", "/runs/pg-steps/events") as r:  # B streams what the worker did
            first = read_events(r, lambda e: e.event == "step" and e.data["name"] == "echo")
        assert ca.post("/runs/pg-steps/signals/go", json=None).status_code == 202
        with ca.stream(
            "GET", "/runs/pg-steps/events", headers={"Last-Event-ID": first[-1].id}
        ) as r:
            rest = read_events(r, lambda e: e.event == "end")  # A resumes B's stream
        keys = [e.data["key"] for e in first + rest if e.event == "step"]
        assert keys == [s["key"] for s in cb.get("/runs/pg-steps/steps").json()["steps"]]
        assert rest[-1].data["result"] == 1

        cb.post("/policies/approval/runs", json={"inputs": {"order": "P-1"}, "run_id": "pg-ok"})
        cb.post("/policies/approval/runs", json={"inputs": {"order": "P-2"}, "run_id": "pg-no"})
        wait_status(ca, "pg-ok", "suspended")
        assert ca.post("/runs/pg-ok/signals/approve", json={"ok": True}).status_code == 202
        assert wait_status(cb, "pg-ok", "succeeded")["result"] == "P-1: shipped"
        wait_status(ca, "pg-no", "suspended")
        assert cb.post("/runs/pg-no/cancel").status_code == 202
        assert wait_status(ca, "pg-no", "cancelled")["status"] == "cancelled"

        bad = ca.post("/policies/greet/runs", json={"inputs": {}, "run_id": "pg-bad"})
        assert bad.status_code == 422 and bad.json()["fields"][0]["field"] == "inputs.name"
        assert cb.get("/runs/pg-bad").status_code == 404
        listed = {r["id"] for r in cb.get("/runs").json()["runs"]}
        assert listed == {"pg-steps", "pg-ok", "pg-no"}
        assert ca.get("/runs").status_code == 200
        with a.client(None) as anon:
            assert anon.get("/runs").status_code == 401
