"""``stalwart ui`` holds against slow, silent and too many clients as the API
does (one mechanism, :mod:`stalwart.http.serving`): each connection that sends
nothing, its headers a line at a time or its body a byte at a time is closed,
one past ``--max-connections`` is refused, and pages are served meanwhile."""

from __future__ import annotations

import time

import httpx
from tests.raw_http import connect, exchange, idle, request, slow_body, slow_headers, status_of

from .ui_server import serving_ui

QUICK = ("--header-timeout", "1", "--body-timeout", "1", "--idle-timeout", "1")


def test_slow_and_silent_connections_are_closed_while_pages_are_served(seeded: str) -> None:
    with serving_ui(seeded, *QUICK) as ui:
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        probes = [
            idle(ui.base).start(),
            slow_headers(ui.base, "/runs").start(),
            slow_body(ui.base, "/run/cancel?id=x", form).start(),
        ]
        page = httpx.get(f"{ui.base}/runs", timeout=10)  # while the slow ones are held
        assert page.status_code == 200
        silent, headers, body = (p.wait() for p in probes)
        assert silent.response == b""
        assert status_of(headers.response) == 408
        assert b"--header-timeout" in headers.response
        assert status_of(body.response) == 408
        assert b"--body-timeout" in body.response
        assert httpx.get(f"{ui.base}/waiting", timeout=10).status_code == 200


def test_past_max_connections_one_is_refused_and_within_them_each_is_served(
    seeded: str,
) -> None:
    with serving_ui(seeded, "--max-connections", "2", "--idle-timeout", "60") as ui:
        get = f"GET /runs HTTP/1.1\r\nHost: {ui.base.removeprefix('http://')}\r\n\r\n".encode()
        held = [connect(ui.base) for _ in range(2)]
        try:
            for sock in held:
                assert exchange(sock, get)[0] == 200
            refused = request(ui.base, get)
            assert status_of(refused) == 503
            assert b"--max-connections" in refused
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + 15
        while True:
            r = httpx.get(f"{ui.base}/runs", timeout=10)
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.status_code == 200
