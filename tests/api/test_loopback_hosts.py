"""``stalwart serve --no-auth`` bound to a loopback address other than
127.0.0.1 answers to that address and still refuses a host name that is not
loopback (DNS rebinding)."""

from __future__ import annotations

import httpx
from tests.conftest import free_port

from .conftest import spawn, stop, wait_ready


def test_serve_on_another_loopback_address_answers_to_it(sqlite_url: str) -> None:
    port = free_port()
    base = f"http://127.0.0.2:{port}"
    proc = spawn(
        [
            "serve",
            "--app",
            "tests/api/api_app.py:policies",
            "--store",
            sqlite_url,
            "--host",
            "127.0.0.2",
            "--port",
            str(port),
            "--no-auth",
        ]
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"stalwart serve: {base}/ ")
        wait_ready(base, proc)
        started = httpx.post(f"{base}/policies/greet/runs", json={"inputs": {"name": "Ada"}})
        assert started.status_code == 201, started.text
        assert httpx.get(f"{base}/runs").status_code == 200
        rebound = httpx.get(f"{base}/runs", headers={"Host": "evil.example"})
        assert rebound.status_code == 421
    finally:
        stop(proc)
