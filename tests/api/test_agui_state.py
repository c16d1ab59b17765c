"""A flow's walk and a journey's steps as AG-UI sees them: ``STEP_STARTED``
and ``STEP_FINISHED`` per node or step, the state whole once
(``STATE_SNAPSHOT``), then each change of it as a JSON Patch
(``STATE_DELTA``). Read by AG-UI's own client (``HttpAgent`` under Node.js,
``js/agui_run_client.mjs``), which verifies the events and applies the
patches, against ``stalwart serve --execute`` in a process of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest

from .conftest import wait_status
from .ui_clients import node, ui_server

FIRST = "Hi, my internet keeps dropping. I'm ada@example.com"


def _stream(js: Path, base: str, run_id: str, stop: int | None = None) -> tuple[list[Any], Any]:
    """The events AG-UI's client saw on the run's stream, and what it held after."""
    extra = [] if stop is None else [str(stop)]
    lines = node(js, "agui_run_client.mjs", f"{base}/runs/{run_id}/agui", *extra)
    events = [line["event"] for line in lines if "event" in line]
    (result,) = [line["result"] for line in lines if "result" in line]
    return events, result


def _applied(events: list[dict[str, Any]]) -> Any:
    """The state the events describe, by another JSON Patch implementation."""
    state: Any = None
    for e in events:
        if e["type"] == "STATE_SNAPSHOT":
            state = e["snapshot"]
        elif e["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, e["delta"])
    return state


def _steps(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["stepName"]) for e in events if e["type"].startswith("STEP_")]


def test_a_flow_walk_is_steps_and_its_store_a_state_the_client_patches(
    js: Path, tmp_path: Path
) -> None:
    with ui_server(tmp_path) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        shared = {"seen": [], "scratch": "x"}
        run_id = c.post("/policies/counting/runs", json={"inputs": {"shared": shared}}).json()["id"]
        result = wait_status(c, run_id, "succeeded")["result"]
        events, held = _stream(js, s.base, run_id)

    assert held["failed"] is None and held["outcome"] == {"type": "success"}
    assert _steps(events) == [
        *[("STEP_STARTED", "Count"), ("STEP_FINISHED", "Count")] * 3,
        ("STEP_STARTED", "Tidy"),
        ("STEP_FINISHED", "Tidy"),
    ]
    states = [e for e in events if e["type"].startswith("STATE_")]
    assert states[0]["type"] == "STATE_SNAPSHOT"
    assert states[0]["snapshot"]["shared"] == shared  # the store it started with
    assert {e["type"] for e in states[1:]} == {"STATE_DELTA"}
    assert result == {
        "seen": [1, 2, 3],
        "totals/by~kind": {"odd": 2, "all": 3},  # a key JSON Pointer escapes
        "done": True,
    }
    assert held["state"]["shared"] == result  # patched by the client
    assert _applied(events) == held["state"]
    # Each delta moves one node on: after the first Count, the store as it left it.
    first = next(i for i, e in enumerate(events) if e["type"] == "STEP_FINISHED")
    assert _applied(events[:first])["shared"] == {
        "seen": [1],
        "scratch": "x",
        "totals/by~kind": {"odd": 1, "all": 1},
    }


def test_a_client_cut_off_mid_stream_gets_the_same_events_again(js: Path, tmp_path: Path) -> None:
    with ui_server(tmp_path) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        shared = {"seen": [], "scratch": 1}
        run_id = c.post("/policies/counting/runs", json={"inputs": {"shared": shared}}).json()["id"]
        wait_status(c, run_id, "succeeded")
        cut, _ = _stream(js, s.base, run_id, stop=5)
        events, held = _stream(js, s.base, run_id)
    assert len(cut) == 5 and events[:5] == cut
    assert held["state"] == _applied(events)


def _journey_done(c: httpx.Client) -> str:
    run_id = c.post("/policies/support/runs", json={"inputs": {"message": FIRST}}).json()["id"]
    for text in ("Yes please.", "Yes, all good now."):  # queued until the journey waits
        assert c.post(f"/runs/{run_id}/signals/message", json=text).status_code == 202
    wait_status(c, run_id, "succeeded")
    return run_id


def test_a_journey_moves_are_steps_and_its_ticket_the_state(js: Path, tmp_path: Path) -> None:
    with ui_server(tmp_path) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        run_id = _journey_done(c)
        result = c.get(f"/runs/{run_id}").json()["result"]
        events, held = _stream(js, s.base, run_id)

    assert held["failed"] is None
    assert [name for kind, name in _steps(events) if kind == "STEP_STARTED"] == [
        "IDENTIFY",
        "DIAGNOSE",
        "RESOLVE",
        "CONFIRM",
    ]
    assert _steps(events)[-1] == ("STEP_FINISHED", "CONFIRM")
    journey = held["state"]["journey"]
    assert journey == {
        "name": "support",
        "step": "CONFIRM",
        "state": result["state"],
        "done": True,
    }
    assert journey["state"]["resolved"] is True
    assert _applied(events) == held["state"]


@pytest.mark.slow
def test_a_journey_stream_is_rebuilt_from_the_ledger_after_a_restart(
    js: Path, tmp_path: Path
) -> None:
    with ui_server(tmp_path) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        run_id = _journey_done(c)
        before, held = _stream(js, s.base, run_id)
        s.kill()
        s.start()
        after, again = _stream(js, s.base, run_id)
    assert after == before
    assert again["state"] == held["state"]
