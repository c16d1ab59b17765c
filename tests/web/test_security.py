"""The inspector's guards: token, host check, CSRF, CSP, escaping, and where it binds."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from tests.conftest import free_port

from stalwart.http.access import CSP

from .conftest import client, start, stop, wait_http

TEMPLATES = Path(__file__).resolve().parents[2] / "src/stalwart/web/templates"


async def test_every_response_forbids_inline_script(seeded: str) -> None:
    async with client(seeded) as c:
        responses = [
            await c.get(p) for p in ("/runs", "/run?id=agent-1", "/waiting", "/static/live.js")
        ]
        responses.append(await c.get("/run?id=missing"))
    for r in responses:
        policy = r.headers["content-security-policy"]
        assert policy == CSP
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"


def test_templates_mark_nothing_safe_and_hold_no_inline_script() -> None:
    for path in TEMPLATES.glob("*.html"):
        text = path.read_text()
        assert "|safe" not in text.replace(" ", "") and "Markup" not in text, path
        assert "autoescape false" not in text, path
        scripts = re.findall(r"<script[^>]*>", text)
        assert all("src=" in s for s in scripts), path
        assert not re.search(r"\son[a-z]+=", text), path  # no inline event handlers


async def test_actions_need_the_csrf_token_and_this_origin(seeded: str) -> None:
    async with client(seeded) as c:
        page = (await c.get("/run", params={"id": "ship-1"})).text
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        form = {"id": "ship-1", "name": "approve", "verdict": "approve"}
        missing = await c.post("/run/signal", data=form)
        wrong = await c.post("/run/signal", data={**form, "csrf": "x" * 32})
        foreign = await c.post(
            "/run/cancel",
            data={"id": "ship-1", "csrf": token},
            headers={"origin": "http://evil.example"},
        )
        opaque = await c.post(
            "/run/cancel", data={"id": "ship-1", "csrf": token}, headers={"origin": "null"}
        )
        as_get = await c.get("/run/cancel", params={"id": "ship-1"})
        after = (await c.get("/run", params={"id": "ship-1"})).text
    for refused in (missing, wrong, foreign, opaque):
        assert refused.status_code == 403, refused.text
    assert as_get.status_code == 405
    assert "s-suspended" in after  # nothing happened to the run


async def test_a_token_guards_every_request(seeded: str) -> None:
    async with client(seeded, token="s3cret-token-value", hosts=None) as c:
        bare = await c.get("/runs")
        static = await c.get("/static/live.js")
        wrong = await c.get("/runs", params={"token": "guess"})
        given = await c.get("/runs", params={"token": "s3cret-token-value", "status": "failed"})
        assert given.status_code == 303
        assert given.headers["location"] == "/runs?status=failed"  # the token leaves the URL
        cookie = given.headers["set-cookie"]
        assert "stalwart_token=s3cret-token-value" in cookie
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        with_cookie = await c.get("/runs")  # the client keeps the cookie
        c.cookies.clear()
        bearer = await c.get("/runs", headers={"authorization": "Bearer s3cret-token-value"})
        bad_bearer = await c.get("/runs", headers={"authorization": "Bearer nope"})
    assert bare.status_code == static.status_code == wrong.status_code == 401
    assert bad_bearer.status_code == 401
    assert with_cookie.status_code == bearer.status_code == 200
    assert "s3cret" not in with_cookie.text  # never rendered into a page


async def test_on_loopback_only_loopback_host_names_are_served(seeded: str) -> None:
    """A site that points its own domain at 127.0.0.1 (DNS rebinding) is refused."""
    async with client(seeded, hosts=("127.0.0.1", "localhost")) as c:
        ok = await c.get("/runs")
        rebound = await c.get("/runs", headers={"host": "evil.example:8000"})
    assert ok.status_code == 200
    assert rebound.status_code == 421


def _listening(port: int) -> list[str]:
    """The local addresses listening on ``port``, from /proc/net/tcp{,6}."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, _, hexport = local.partition(":")
            if state == "0A" and int(hexport, 16) == port:
                out.append(addr)
    return out


def test_serve_binds_loopback_by_default_and_needs_no_token_there(seeded: str) -> None:
    port = free_port()
    proc = start(["-c", f"from stalwart.web import serve; serve({seeded!r}, port={port})"])
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert banner.strip() == f"stalwart ui: open http://localhost:{port}/"
        wait_http(f"http://127.0.0.1:{port}/runs")
        assert _listening(port) == ["0100007F"]  # 127.0.0.1, nothing else

        assert httpx.get(f"http://127.0.0.1:{port}/runs").status_code == 200
    finally:
        stop(proc)


@pytest.mark.slow
def test_serve_elsewhere_makes_up_a_token_and_requires_it(seeded: str) -> None:
    port = free_port()
    # The command a user types: stalwart ui --host 0.0.0.0
    proc = start(
        ["-m", "stalwart.cli", "ui", "--store", seeded, "--host", "0.0.0.0", "--port", str(port)]
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline().strip()
        found = re.fullmatch(rf"stalwart ui: open http://0\.0\.0\.0:{port}/\?token=(\S+)", banner)
        assert found, banner
        token = found.group(1)
        assert len(token) >= 24
        wait_http(f"http://127.0.0.1:{port}/runs")

        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/runs").status_code == 401
        assert (
            httpx.get(f"{base}/runs", headers={"authorization": f"Bearer {token}"}).status_code
            == 200
        )
        with httpx.Client(base_url=base, follow_redirects=True) as browser:
            assert browser.get("/runs", params={"token": token}).status_code == 200
            assert browser.get("/waiting").status_code == 200  # by the cookie alone
    finally:
        stop(proc)
