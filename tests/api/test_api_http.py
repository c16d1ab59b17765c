"""The HTTP API over real HTTP: a ``stalwart serve`` process that only
enqueues, and a ``stalwart worker`` process that executes, on one SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from stalwart.api import Cursor

from .conftest import (
    OTHER_TOKEN,
    SSE,
    TOKEN,
    Server,
    read_events,
    serving,
    spawn,
    stop,
    wait_status,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = f"sqlite:///{tmp_path_factory.mktemp('api') / 'api.db'}"
    with serving(store, "--token", OTHER_TOKEN) as srv:
        worker = spawn(["worker", "--store", store, "--app", "tests/api/api_app.py"])
        try:
            yield srv
        finally:
            stop(worker)


@pytest.fixture
def c(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def test_start_then_get_the_result(c: httpx.Client) -> None:
    r = c.post("/policies/greet/runs", json={"inputs": {"name": "Ada", "times": 2}})
    assert r.status_code == 201, r.text
    run = r.json()
    assert run["policy"] == "greet" and run["inputs"] == {"name": "Ada", "times": 2}
    assert r.headers["location"] == f"/runs/{run['id']}"
    done = wait_status(c, run["id"], "succeeded")  # the worker process executed it
    assert done["result"] == "hello Ada hello Ada"
    assert done["error"] is None


def test_every_request_needs_a_token(server: Server) -> None:
    for token in (None, "wrong-token-0123456789abcdef", f"{TOKEN}x"):
        with server.client(token) as anon:
            requests = [("GET", "/runs"), ("GET", "/openapi.json"), ("GET", "/runs/x/events"),
                        ("POST", "/policies/greet/runs")]  # fmt: skip
            for method, path in requests:
                r = anon.request(method, path, json={"inputs": {"name": "x"}})
                assert r.status_code == 401, (token, path, r.text)
                assert r.headers["www-authenticate"].startswith("Bearer")
                assert TOKEN not in r.text
    with server.client(OTHER_TOKEN) as second:  # any of the server's tokens
        assert second.get("/runs").status_code == 200


def test_bad_inputs_are_a_422_naming_the_field_and_record_nothing(c: httpx.Client) -> None:
    r = c.post(
        "/policies/greet/runs",
        json={"inputs": {"times": "many", "colour": "red"}, "run_id": "bad-1"},
    )
    assert r.status_code == 422
    fields = {f["field"] for f in r.json()["fields"]}
    assert fields == {"inputs.name", "inputs.times", "inputs.colour"}
    assert r.json()["code"] is None  # no Stalwart error behind a field at fault
    missing = c.get("/runs/bad-1")
    assert missing.status_code == 404  # nothing was recorded
    assert missing.json()["code"] == "run_not_found"
    r = c.post("/policies/greet/runs", json={"inputs": {"name": "x"}, "run_id": "a~b"})
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "run_id"
    r = c.post("/policies/greet/runs", json={"inputs": {"name": "x"}, "priority": "high"})
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "priority"
    r = c.post(
        "/policies/greet/runs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "(body)"
    assert c.post("/policies/nope/runs", json={}).status_code == 404


def test_start_is_idempotent_by_run_id(c: httpx.Client) -> None:
    body = {"inputs": {"name": "Bo"}, "run_id": "same-1"}
    first = c.post("/policies/greet/runs", json=body)
    again = c.post("/policies/greet/runs", json=body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == "same-1"
    other = c.post("/policies/greet/runs", json={**body, "inputs": {"name": "Cy"}})
    assert other.status_code == 409 and "same-1" in other.json()["error"]
    assert other.json()["code"] == "input_mismatch_error"
    assert wait_status(c, "same-1", "succeeded")["result"] == "hello Bo"
    listed = c.get("/runs", params={"id_contains": "same-1"}).json()["runs"]
    assert [r["id"] for r in listed] == ["same-1"]  # one run


def test_list_filters_and_pages_without_gaps(c: httpx.Client) -> None:
    ids = [f"page-{i}" for i in range(5)]
    for i in ids:
        assert c.post("/policies/greet/runs", json={"inputs": {"name": i}, "run_id": i}).is_success
    seen: list[str] = []
    params: dict[str, str | int] = {"id_contains": "page-", "limit": 2}
    while True:
        page = c.get("/runs", params=params).json()
        seen += [r["id"] for r in page["runs"]]
        if page["next"] is None:
            break
        params["cursor"] = page["next"]
    assert seen == list(reversed(ids))  # newest first, each once
    r = c.get("/runs", params={"status": "done", "limit": 0})
    assert r.status_code == 422
    assert {f["field"] for f in r.json()["fields"]} == {"status", "limit"}
    assert (
        c.get("/runs", params={"policy": "approval", "id_contains": "page-"}).json()["runs"] == []
    )


def test_signal_and_cancel(c: httpx.Client) -> None:
    c.post("/policies/approval/runs", json={"inputs": {"order": "A-1"}, "run_id": "ok-1"})
    c.post("/policies/approval/runs", json={"inputs": {"order": "A-2"}, "run_id": "no-1"})
    waiting = wait_status(c, "ok-1", "suspended")
    assert waiting["waiting_for"] == "approve"
    r = c.post("/runs/ok-1/signals/approve", json={"ok": True})
    assert r.status_code == 202
    assert wait_status(c, "ok-1", "succeeded")["result"] == "A-1: shipped"
    assert c.post("/runs/ok-1/signals/approve", json={}).status_code == 409  # finished

    wait_status(c, "no-1", "suspended")
    assert c.post("/runs/no-1/cancel", json=None).status_code == 202
    cancelled = wait_status(c, "no-1", "cancelled")
    assert cancelled["error"]["type"] == "CancelledRun"
    assert c.post("/runs/no-1/cancel", json=None).status_code == 409
    assert c.post("/runs/nobody/cancel", json=None).status_code == 404


def test_a_run_id_with_a_slash_is_one_path_segment(c: httpx.Client) -> None:
    run_id = "user/42/chat?x#y"
    r = c.post("/policies/greet/runs", json={"inputs": {"name": "Di"}, "run_id": run_id})
    assert r.status_code == 201
    assert r.headers["location"] == f"/runs/{quote(run_id, safe='')}"
    assert wait_status(c, quote(run_id, safe=""), "succeeded")["id"] == run_id


def _stream(c: httpx.Client, run_id: str, until: str | int, last: str | None = None) -> list[SSE]:
    """Read the run's stream until an ``until`` event (a type, or the step
    of echo(i)), then hang up."""
    headers = {"Last-Event-ID": last} if last else {}

    def done(ev: SSE) -> bool:
        if isinstance(until, str):
            return ev.event == until
        return ev.event == "step" and ev.data["name"] == "echo" and ev.data["output"] == until

    with c.stream("GET", f"/runs/{run_id}/events", headers=headers) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        return read_events(r, done)


def test_stream_resumes_with_last_event_id_missing_nothing(c: httpx.Client) -> None:
    c.post("/policies/stepper/runs", json={"inputs": {"n": 4}, "run_id": "steps-1"})
    wait_status(c, "steps-1", "suspended")
    c.post("/runs/steps-1/signals/go", json=None)
    first = _stream(c, "steps-1", until=0)  # live: cut after the first echo
    ids = [e.id for e in first]
    assert all(ids)
    # While nobody listens, the run goes on: two more steps of echo.
    c.post("/runs/steps-1/signals/go", json=None)
    c.post("/runs/steps-1/signals/go", json=None)
    wait_status(c, "steps-1", "suspended")
    rest = _stream(c, "steps-1", until=2, last=first[-1].id)
    c.post("/runs/steps-1/signals/go", json=None)
    tail = _stream(c, "steps-1", until="end", last=rest[-1].id)

    keys = [e.data["key"] for e in first + rest + tail if e.event == "step"]
    everything = c.get("/runs/steps-1/steps").json()["steps"]  # one page: fewer than 50
    assert keys == [s["key"] for s in everything]  # each step once, in order, none missed
    steps = [e.data for e in first + rest + tail if e.event == "step"]
    echoes = [s["output"] for s in steps if s["name"] == "echo"]
    assert echoes == [0, 1, 2, 3]
    end = tail[-1]
    assert end.event == "end" and end.data["status"] == "succeeded" and end.data["result"] == 6
    # After the end, a reconnect gets only the end again.
    again = _stream(c, "steps-1", until="end", last=end.id)
    assert [e.event for e in again] == ["end"]


def test_a_cursor_that_counts_fewer_steps_than_it_covers_starts_over(c: httpx.Client) -> None:
    """A step recorded late with an earlier time would hide behind a cursor;
    the stream then sends every step again rather than skip one."""
    c.post("/policies/greet/runs", json={"inputs": {"name": "Ed"}, "run_id": "late-1"})
    wait_status(c, "late-1", "succeeded")
    c.post("/policies/stepper/runs", json={"inputs": {"n": 1}, "run_id": "late-2"})
    wait_status(c, "late-2", "suspended")
    c.post("/runs/late-2/signals/go", json=None)
    steps = wait_status(c, "late-2", "succeeded") and c.get("/runs/late-2/steps").json()["steps"]
    last = steps[-1]
    honest = Cursor(len(steps), (last["finished_at"], last["key"])).encode()
    assert [e.event for e in _stream(c, "late-2", "end", last=honest)] == ["end"]
    short = Cursor(len(steps) - 1, (last["finished_at"], last["key"])).encode()
    replayed = [e.data["key"] for e in _stream(c, "late-2", "end", last=short) if e.event == "step"]
    assert replayed == [s["key"] for s in steps]
    bad = c.get("/runs/late-2/events", headers={"Last-Event-ID": "3_x_!!"})
    assert bad.status_code == 400 and bad.json()["fields"][0]["field"] == "Last-Event-ID"


def test_openapi_describes_each_policy_from_its_schema(c: httpx.Client) -> None:
    doc = c.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    start = doc["paths"]["/policies/greet/runs"]["post"]
    assert start["description"] == "Greet someone."
    inputs = doc["components"]["schemas"]["GreetInputs"]
    assert inputs["required"] == ["name"]
    assert inputs["properties"]["times"] == {
        "default": 1, "description": "How many times.", "type": "integer"
    }  # fmt: skip
    assert doc["security"] == [{"bearer": []}]
    assert {"/runs", "/runs/{run_id}", "/runs/{run_id}/events", "/runs/{run_id}/cancel",
            "/runs/{run_id}/signals/{name}"} <= set(doc["paths"])  # fmt: skip
    policies = c.get("/policies").json()
    assert [p["name"] for p in policies] == ["approval", "greet", "stepper"]


def test_requests_that_a_page_elsewhere_could_forge_are_refused(c: httpx.Client) -> None:
    plain = c.post(
        "/policies/greet/runs", content=b'{"inputs": {"name": "x"}}',
        headers={"content-type": "text/plain"},
    )  # fmt: skip
    assert plain.status_code == 415
    foreign = c.post("/policies/greet/runs", json={"inputs": {"name": "x"}},
                     headers={"origin": "https://evil.example"})  # fmt: skip
    assert foreign.status_code == 403
    r = c.get("/runs")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in r.headers["content-security-policy"]


def test_serve_refuses_to_run_without_auth_beyond_loopback(sqlite_url: str) -> None:
    from typer.testing import CliRunner

    from stalwart.cli.app import app

    store = sqlite_url
    cases = [
        (["--no-auth", "--host", "0.0.0.0"], "loopback"),
        ([], "bearer tokens"),
        (["--token", "short"], "at least 16"),
        (["--token", TOKEN, "--no-auth"], "not both"),
    ]
    for extra, why in cases:
        args = ["serve", "--app", "tests/api/api_app.py:policies", "--store", store, *extra]
        result = CliRunner().invoke(app, args, env={"STALWART_API_TOKENS": ""})
        assert result.exit_code == 2, result.output
        assert why in result.output, result.output
        assert TOKEN not in result.output


def test_ledger_text_stays_data_in_the_stream(c: httpx.Client) -> None:
    """A value that looks like SSE framing (or markup) arrives as the JSON
    string it is: it can neither add an event nor end one."""
    hostile = 'x\n\nevent: end\ndata: {"status": "forged"}\n\nid: 99\r\n<script>alert(1)</script>'
    body = {"inputs": {"order": hostile}, "run_id": "hostile-1"}
    assert c.post("/policies/approval/runs", json=body).status_code == 201
    wait_status(c, "hostile-1", "suspended")
    c.post("/runs/hostile-1/signals/approve", json={"ok": True, "note": hostile})
    wait_status(c, "hostile-1", "succeeded")
    with c.stream("GET", "/runs/hostile-1/events") as resp:
        events = read_events(resp, lambda e: e.event == "end")
    kinds = [e.data["kind"] for e in events if e.event == "step"]
    assert [e.event for e in events] == ["step"] * len(kinds) + ["end"]
    outputs = {e.data["kind"]: e.data["output"] for e in events if e.event == "step"}
    assert outputs["ask"]["prompt"] == f"ship {hostile}?"
    assert outputs["signal:approve"] == {"ok": True, "note": hostile}
    assert events[-1].data["status"] == "succeeded"
    assert events[-1].data["result"] == f"{hostile}: shipped"
    assert c.get("/runs/hostile-1").headers["content-type"] == "application/json"
