"""The inspector's one redirect (``?token=`` sets the cookie, then the same
address without it) always leads to a page of this server, whatever the
request's path holds: never to another site."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urljoin, urlsplit

import pytest
from tests.raw_http import request, status_of

from .ui_server import UI, serving_ui

TOKEN = "inspector-token-0123456789"

# Paths a browser would follow elsewhere if echoed: two slashes, a backslash
# (read as a slash), either percent-encoded (decoded before routing), and
# tabs or newlines between (dropped by a browser's URL parser).
PAYLOADS = [
    "//evil.example/",
    "//evil.example/runs",
    "///evil.example/",
    "/\\evil.example/",
    "/\\/evil.example/",
    "/%2F%2Fevil.example/",
    "/%2f/evil.example/",
    "/%5C%5Cevil.example/",
    "/%5Cevil.example/",
    "/%09/evil.example/",
    "/%0A/evil.example/",
    "/%0D%0A/evil.example/",
    "/%2F%09%2Fevil.example/",
    "/%20//evil.example/",
]


@pytest.fixture(scope="module")
def ui(seeded: str) -> Iterator[UI]:
    with serving_ui(seeded, "--token", TOKEN) as server:
        yield server


def _redirect(ui: UI, target: str) -> str:
    """The ``Location`` the server answers a request for ``target`` with."""
    host = ui.base.removeprefix("http://")
    raw = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    response = request(ui.base, raw)
    assert status_of(response) == 303, response
    head = response.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    found = [
        line.split(":", 1)[1].strip()
        for line in head.split("\r\n")[1:]
        if line.lower().startswith("location:")
    ]
    assert len(found) == 1, head
    return found[0]


def _as_a_browser_follows(base: str, location: str) -> str:
    """Where a browser goes for ``location`` (the WHATWG URL parser drops tabs
    and newlines and reads a backslash as a slash in an http URL)."""
    cleaned = location.replace("\t", "").replace("\n", "").replace("\r", "")
    return urljoin(base + "/", cleaned.replace("\\", "/"))


@pytest.mark.parametrize("path", PAYLOADS)
def test_the_token_redirect_stays_on_this_server(ui: UI, path: str) -> None:
    location = _redirect(ui, f"{path}?token={TOKEN}")
    assert location.startswith("/") and location[1:2] not in ("/", "\\"), location
    assert location.isprintable() and location.isascii() and " " not in location, location
    followed = urlsplit(_as_a_browser_follows(ui.base, location))
    assert f"{followed.scheme}://{followed.netloc}" == ui.base, location


def test_the_token_redirect_keeps_the_page_and_its_other_parameters(ui: UI) -> None:
    assert _redirect(ui, f"/run?id=a%2Fb&token={TOKEN}&tab=steps") == "/run?id=a%2Fb&tab=steps"
    assert _redirect(ui, f"/waiting?token={TOKEN}") == "/waiting"
    assert _redirect(ui, f"/?token={TOKEN}") == "/"
