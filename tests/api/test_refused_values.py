"""Values out of range, or of another JSON type than the document says, are
refused with a 422 (400 for an event id) naming the field and what it
takes, and leave nothing in the store: a real ``stalwart serve`` process."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from stalwart.core.ledger import MAX_DELAY

from .conftest import serving


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    store = f"sqlite:///{tmp_path_factory.mktemp('values') / 'api.db'}"
    with serving(store) as srv, srv.client() as client:
        yield client


def _refused(r: httpx.Response, field: str, *words: str, status: int = 422) -> None:
    assert r.status_code == status, r.text
    fields = {f["field"]: f["message"] for f in r.json()["fields"]}
    assert field in fields, r.text
    for word in words:
        assert word in fields[field], r.text


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"delay": 1e308}, "delay", [str(MAX_DELAY)]),  # the run would never be due
        ({"delay": MAX_DELAY + 1}, "delay", [str(MAX_DELAY)]),
        ({"delay": False}, "delay", ["number"]),  # not 0 seconds
        ({"priority": True}, "priority", ["integer"]),
        ({"priority": "3"}, "priority", ["integer"]),
        ({"run_id": "   "}, "run_id", ["only spaces"]),
        ({"run_id": ""}, "run_id", ["empty"]),
        ({"inputs": {"name": "x", "times": "2"}}, "inputs.times", ["integer"]),
        ({"inputs": {"name": "x", "times": True}}, "inputs.times", ["integer"]),
        ({"inputs": {"name": 5}}, "inputs.name", ["string"]),
    ],
)
def test_a_start_with_a_value_out_of_range_is_refused_and_records_nothing(
    c: httpx.Client, body: dict[str, object], field: str, words: list[str]
) -> None:
    full = {"inputs": {"name": "x"}, "run_id": f"never-{uuid.uuid4().hex}", **body}
    _refused(c.post("/policies/greet/runs", json=full), field, *words)
    run_id = str(full["run_id"])
    if run_id:  # nothing recorded
        assert c.get(f"/runs/{quote(run_id, safe='')}").status_code == 404


def test_the_longest_delay_is_taken(c: httpx.Client) -> None:
    r = c.post("/policies/greet/runs", json={"inputs": {"name": "x"}, "delay": MAX_DELAY})
    assert r.status_code == 201, r.text


def _old_cursor(when: object, run_id: str) -> str:
    raw = json.dumps([when, run_id]).encode()  # NaN and Infinity, as Python writes them
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("created_after=", "created_after"),  # given empty is not "any"
        ("status=", "status"),
        ("policy=", "policy"),
        ("limit=", "limit"),
        ("cursor=", "cursor"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=true", "limit"),
        ("limit=%2B5", "limit"),  # +5: Python's int() reads it, JSON does not
        ("created_after=nan", "created_after"),
        ("created_after=inf", "created_after"),
        ("created_before=1_000", "created_before"),
        ("created_before=1e400", "created_before"),
        ("cursor=nan_eA%3D%3D", "cursor"),
        ("cursor=inf_eA%3D%3D", "cursor"),
        (f"cursor={_old_cursor(float('nan'), 'x')}", "cursor"),
        (f"cursor={_old_cursor(float('inf'), 'x')}", "cursor"),
    ],
)
def test_a_listing_parameter_out_of_range_is_a_422_naming_it(
    c: httpx.Client, query: str, field: str
) -> None:
    _refused(c.get(f"/runs?{query}"), field)


def test_listing_pages_with_the_cursor_it_gives(c: httpx.Client) -> None:
    for i in range(3):
        body = {"inputs": {"name": "x"}, "run_id": f"page/{i} é"}
        assert c.post("/policies/greet/runs", json=body).status_code in (200, 201)
    seen: list[str] = []
    cursor = None
    while True:
        page = c.get("/runs", params={"limit": 1, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        seen += [r["id"] for r in page.json()["runs"]]
        cursor = page.json()["next"]
        if cursor is None:
            break
    assert {"page/0 é", "page/1 é", "page/2 é"} <= set(seen)
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize(
    "headers, query, field",
    [
        ({"Last-Event-ID": "1_nan_Mg=="}, "", "Last-Event-ID"),
        ({"Last-Event-ID": "1_inf_Mg=="}, "", "Last-Event-ID"),
        ({"Last-Event-ID": ""}, "", "Last-Event-ID"),
        ({}, "?last_event_id=", "last_event_id"),
        ({"Last-Event-ID": "0"}, "?last_event_id=1_1e400_Mg==", "last_event_id"),
    ],
)
def test_an_event_id_this_api_never_writes_is_a_400_naming_it(
    c: httpx.Client, headers: dict[str, str], query: str, field: str
) -> None:
    r = c.post("/policies/greet/runs", json={"inputs": {"name": "x"}, "run_id": "streamed"})
    assert r.status_code in (200, 201)
    with c.stream("GET", f"/runs/streamed/events{query}", headers=headers) as r:
        assert r.status_code == 400  # not a stream (which would never end)
        r.read()
    _refused(r, field, status=400)


def test_a_bad_signal_name_is_a_documented_422(c: httpx.Client) -> None:
    r = c.post("/policies/greet/runs", json={"inputs": {"name": "x"}, "run_id": "signalled"})
    assert r.status_code in (200, 201)
    _refused(c.post("/runs/signalled/signals/a%01b", json=None), "name", "printable")
    doc = c.get("/openapi.json").json()
    assert "422" in doc["paths"]["/runs/{run_id}/signals/{name}"]["post"]["responses"]
