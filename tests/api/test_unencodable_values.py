"""A JSON body holding text UTF-8 cannot encode (a lone surrogate,
``"\\ud800"``, legal JSON) is refused with a 422 naming the field, and
nothing is recorded: no run for a start (a retry cannot run it twice), no
signal for a signal; every read of the store keeps answering. Against a real
``stalwart serve`` process and a real worker, on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import httpx

from .conftest import serving, wait_status

JSON = {"Content-Type": "application/json"}


def test_a_start_holding_one_is_a_422_naming_the_field_and_creates_no_run(
    store_url: str,
) -> None:
    with serving(store_url) as srv, srv.client() as c:
        body = '{"run_id": "lone-1", "inputs": {"name": "Ada \\ud800"}}'
        r = c.post("/policies/greet/runs", content=body, headers=JSON)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"] == "application/json"
        (field,) = r.json()["fields"]
        assert field["field"] == "inputs.name"
        assert "U+D800" in field["message"] and "lone surrogate" in field["message"]
        assert c.get("/runs/lone-1").status_code == 404  # nothing was recorded
        listed = c.get("/runs")
        assert listed.status_code == 200 and listed.json()["runs"] == []
        # A key holding one, deeper in a value: named too.
        body = '{"run_id": "lone-2", "inputs": {"order": "A", "\\udc00": 1}}'
        r = c.post("/policies/approval/runs", content=body, headers=JSON)
        assert r.status_code == 422 and c.get("/runs/lone-2").status_code == 404


def test_a_signal_holding_one_is_a_422_and_nothing_is_delivered(
    store_url: str, worker: Callable[[str], subprocess.Popen[str]]
) -> None:
    with serving(store_url) as srv, srv.client() as c:
        r = c.post("/policies/approval/runs", json={"run_id": "ship-1", "inputs": {"order": "A"}})
        assert r.status_code == 201, r.text
        worker(store_url)
        wait_status(c, "ship-1", "suspended")
        r = c.post("/runs/ship-1/signals/approve", content='{"ok": "\\udc00"}', headers=JSON)
        assert r.status_code == 422, r.text
        assert "['ok']: the text holds U+DC00" in r.json()["error"]
        for path in ("/runs/ship-1", "/runs/ship-1/steps", "/runs"):
            assert c.get(path).status_code == 200, path
        assert c.get("/runs/ship-1").json()["status"] == "suspended"
        # The refused body was never queued: the run takes the next one.
        r = c.post("/runs/ship-1/signals/approve", json={"ok": False})
        assert r.status_code == 202, r.text
        assert wait_status(c, "ship-1", "succeeded")["result"] == "A: held"
        with httpx.stream(
            "GET", f"{srv.base}/runs/ship-1/events", headers=c.headers, timeout=30
        ) as events:
            assert events.status_code == 200
            assert "A: held" in events.read().decode("utf-8")
