"""``--max-streams`` holds under a burst: the clients of a restarted server
all reconnect at once, and exactly the limit get a stream; the rest are
told to come back (503, ``Retry-After``). A real ``stalwart serve`` on each
store kind, and raw sockets, opened together."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

from .conftest import TOKEN, serving

LIMIT = 10
BURST = 40


def _open(host: str, port: int, path: str, go: threading.Event) -> socket.socket:
    """A connection that has sent its request once ``go`` is set."""
    sock = socket.create_connection((host, port), timeout=30)
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    go.wait(30)
    sock.sendall(request)
    return sock


def _head(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """The status and headers of the answer on ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def test_a_burst_of_stream_opens_gets_exactly_the_limit(store_url: str) -> None:
    with serving(store_url, "--max-streams", str(LIMIT)) as srv, srv.client() as c:
        # A run that waits for a signal: its stream stays open.
        r = c.post("/policies/approval/runs", json={"inputs": {"order": "A-1"}, "run_id": "held"})
        assert r.status_code == 201, r.text
        url = urlsplit(srv.base)
        assert url.hostname is not None and url.port is not None
        go = threading.Event()
        socks: list[socket.socket] = []
        lock = threading.Lock()

        def connect() -> None:
            sock = _open(str(url.hostname), int(url.port), "/runs/held/events", go)
            with lock:
                socks.append(sock)

        threads = [threading.Thread(target=connect) for _ in range(BURST)]
        for t in threads:
            t.start()
        go.set()  # every request leaves at once
        for t in threads:
            t.join(60)
        try:
            answers = [_head(s) for s in socks]
        finally:
            for s in socks:
                s.close()
        statuses = sorted(status for status, _ in answers)
        assert len(answers) == BURST
        assert statuses.count(200) == LIMIT, statuses
        assert statuses.count(503) == BURST - LIMIT, statuses
        assert all(h.get("retry-after", "").isdigit() for s, h in answers if s == 503)
        # The places are given back when the clients leave: a new stream opens
        # (once the server has seen them go; bounded, not timed).
        deadline = time.monotonic() + 30
        while True:
            with c.stream("GET", "/runs/held/events") as again:
                if again.status_code == 200:
                    break
                assert again.status_code == 503
            assert time.monotonic() < deadline, "the closed streams' places never came back"
            time.sleep(0.2)
