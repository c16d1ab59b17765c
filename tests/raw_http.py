"""Raw-socket HTTP clients, slow and idle on purpose: what the API's and the
inspector's connection limits are tested with.

Each probe runs until the server closes its connection or a bound passes;
past the bound the probe fails (a server that never closes is the bug), so
no test hangs.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = [
    "Probe",
    "connect",
    "exchange",
    "held",
    "idle",
    "request",
    "slow_body",
    "slow_headers",
    "status_of",
]


def connect(base: str) -> socket.socket:
    """A TCP connection to the server at ``base`` (``http://host:port``)."""
    parts = urlsplit(base)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10)


def status_of(response: bytes) -> int | None:
    """The status code of a raw HTTP response, None for no response."""
    line = response.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) >= 2 and line[1].isdigit() else None


def request(base: str, raw: bytes, bound: float = 15.0) -> bytes:
    """Send ``raw`` as it is on a connection of its own; what the server
    answers, up to its closing the connection (``Connection: close`` is the
    caller's to send) or ``bound`` seconds."""
    with connect(base) as sock:
        sock.sendall(raw)
        return _read_until_closed(sock, bound)


def exchange(sock: socket.socket, raw: bytes) -> tuple[int | None, bytes]:
    """Send one request on an open connection and read its response (sized by
    ``Content-Length``), leaving the connection open: status and body."""
    sock.settimeout(15)
    sock.sendall(raw)
    got = b""
    while b"\r\n\r\n" not in got:
        data = sock.recv(65536)
        if not data:
            return status_of(got), b""
        got += data
    head, _, body = got.partition(b"\r\n\r\n")
    size = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            size = int(value)
    while len(body) < size:
        data = sock.recv(65536)
        if not data:
            break
        body += data
    return status_of(head), body


def _read_until_closed(sock: socket.socket, bound: float) -> bytes:
    got = b""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        except (ConnectionResetError, BrokenPipeError):
            return got
        if not data:
            return got
        got += data
    raise AssertionError(f"the server kept the connection open for {bound} s; it sent {got!r}")


@dataclass
class Probe:
    """A slow client on a thread of its own: what it sends, one piece every
    ``every`` seconds, until the server closes the connection."""

    name: str
    base: str
    head: bytes = b""  # sent at once
    pieces: Iterator[bytes] = field(default_factory=lambda: iter(()))
    every: float = 0.5
    bound: float = 20.0
    response: bytes = b""
    error: str | None = None
    closed: bool = False
    _thread: threading.Thread | None = None

    def start(self) -> Probe:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            with connect(self.base) as sock:
                if self.head:
                    sock.sendall(self.head)
                deadline = time.monotonic() + self.bound
                while time.monotonic() < deadline:
                    sock.settimeout(self.every)
                    try:
                        data = sock.recv(65536)
                    except TimeoutError:
                        data = None  # nothing yet: send the next piece
                    except (ConnectionResetError, BrokenPipeError):
                        self.closed = True
                        return
                    if data == b"":
                        self.closed = True
                        return
                    if data:
                        self.response += data
                        continue
                    piece = next(self.pieces, b"")
                    if piece:
                        try:
                            sock.sendall(piece)
                        except (ConnectionResetError, BrokenPipeError):
                            self.closed = True
                            return
                self.error = f"{self.name}: still open after {self.bound} s"
        except Exception as exc:  # shown by wait(): a probe thread must not die silently
            self.error = f"{self.name}: {exc!r}"

    def wait(self) -> Probe:
        """Wait for the probe to end; fail if the server never closed."""
        assert self._thread is not None
        self._thread.join(self.bound + 10)
        assert self.error is None and self.closed, self.error or f"{self.name} never ended"
        return self


def idle(base: str, bound: float = 20.0) -> Probe:
    """A connection that sends nothing."""
    return Probe("idle", base, bound=bound)


def slow_headers(base: str, path: str = "/", bound: float = 20.0) -> Probe:
    """A request whose headers arrive one line every half second, without end."""
    lines = (f"X-Slow-{i}: {i}\r\n".encode() for i in range(1_000_000))
    head = f"GET {path} HTTP/1.1\r\nHost: {urlsplit(base).netloc}\r\n".encode()
    return Probe("slow headers", base, head, lines, bound=bound)


def slow_body(
    base: str, path: str, headers: dict[str, str] | None = None, bound: float = 20.0
) -> Probe:
    """A POST whose complete headers promise a long body that then arrives
    a byte every half second."""
    fields = {
        "Host": urlsplit(base).netloc,
        "Content-Type": "application/json",
        "Content-Length": "100000",
        **(headers or {}),
    }
    head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return Probe("slow body", base, head.encode() + b"\r\n", iter(lambda: b" ", None), bound=bound)


@contextlib.contextmanager
def held(base: str, count: int) -> Iterator[list[socket.socket]]:
    """``count`` open connections that send nothing, closed when the block ends."""
    socks = [connect(base) for _ in range(count)]
    try:
        yield socks
    finally:
        for sock in socks:
            sock.close()
