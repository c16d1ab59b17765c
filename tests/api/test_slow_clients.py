"""``stalwart serve`` holds against slow, silent and too many clients: each
connection that sends nothing, its headers a line at a time or its body a
byte at a time is closed by the server, a connection past
``--max-connections`` is refused, and requests within the limits are served
meanwhile. Against a real server process, on SQLite and PostgreSQL, with
small limits given by the flags."""

from __future__ import annotations

import time

import httpx
from tests.raw_http import (
    Probe,
    connect,
    exchange,
    idle,
    request,
    slow_body,
    slow_headers,
    status_of,
)

from .conftest import TOKEN, serving, spawn

QUICK = ("--header-timeout", "1", "--body-timeout", "1", "--idle-timeout", "1")
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_slow_and_silent_connections_are_closed_while_requests_are_served(
    store_url: str,
) -> None:
    with serving(store_url, *QUICK) as srv:
        host = srv.base.removeprefix("http://")
        get = f"GET /runs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        probes = [
            idle(srv.base).start(),
            slow_headers(srv.base, "/runs").start(),
            slow_body(srv.base, "/policies/greet/runs", AUTH).start(),
            slow_body(srv.base, "/policies/greet/runs").start(),  # no token needed to try
            # One request answered, then nothing: closed as idle too.
            Probe("idle after a response", srv.base, get.encode()).start(),
        ]
        with srv.client() as c:  # while the slow ones are held
            r = c.post("/policies/greet/runs", json={"inputs": {"name": "Ada"}, "run_id": "busy"})
            assert r.status_code == 201, r.text
            assert c.get("/runs/busy").json()["id"] == "busy"
        silent, headers, body, anonymous, after = (p.wait() for p in probes)
        assert silent.response == b""  # closed without a word
        assert status_of(headers.response) == 408
        assert b"--header-timeout" in headers.response
        assert status_of(body.response) == 408
        assert b"--body-timeout" in body.response
        assert status_of(anonymous.response) == 401  # refused at once, then closed
        assert status_of(after.response) == 200
        with srv.client() as c:  # and the server serves on
            assert c.get("/runs/busy").status_code == 200
            started = c.post("/policies/greet/runs", json={"inputs": {"name": "Bo"}})
            assert started.status_code == 201, started.text


def test_past_max_connections_one_is_refused_and_within_them_each_is_served(
    store_url: str,
) -> None:
    with serving(store_url, "--max-connections", "3", "--idle-timeout", "60") as srv:
        host = srv.base.removeprefix("http://")
        get = f"GET /runs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        held = [connect(srv.base) for _ in range(3)]
        try:
            for sock in held:  # each served while the ones before it stay open
                status, _ = exchange(sock, get.encode())
                assert status == 200
            refused = request(srv.base, get.encode())
            assert status_of(refused) == 503
            assert b"retry-after: 1" in refused.lower()
            assert b"--max-connections" in refused
            status, _ = exchange(held[0], get.encode())  # the ones held are still served
            assert status == 200
        finally:
            for sock in held:
                sock.close()
        # Places free as the server sees the connections close.
        deadline = time.monotonic() + 15
        while True:
            r = httpx.get(f"{srv.base}/runs", headers=AUTH, timeout=10)
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.status_code == 200, r.text


def test_a_limit_that_limits_nothing_is_refused_at_start(sqlite_url: str) -> None:
    for command, flag, value in [
        (["serve", "--app", "tests/api/api_app.py:policies", "--no-auth"], "--header-timeout", "0"),
        (
            ["serve", "--app", "tests/api/api_app.py:policies", "--no-auth"],
            "--max-connections",
            "0",
        ),
        (["ui"], "--body-timeout", "nan"),
        (["ui"], "--idle-timeout", "-1"),
    ]:
        proc = spawn([*command, "--store", sqlite_url, flag, value])
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        assert flag in err and value in err, err
        assert "seconds above 0" in err or "at least 1" in err, err  # says what is allowed
