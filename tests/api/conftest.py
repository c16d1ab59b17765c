"""Real processes for the API tests: ``stalwart serve`` and ``stalwart worker``
on a free port, and a small reader of Server-Sent Events."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/api/api_app.py"
TOKEN = "test-token-0123456789abcdef"
OTHER_TOKEN = "second-token-fedcba9876543210"


def spawn(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m stalwart.cli ARGS`` from the repository's root, importing
    this checkout's ``src`` (not whichever checkout is installed editable)."""
    return subprocess.Popen(
        [sys.executable, "-m", "stalwart.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
            **(env or {}),
        },
    )


def stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the process; what it wrote, for a failing test to show."""
    if proc.poll() is None:
        proc.terminate()
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return f"{out}\n{err}"


@dataclass
class Server:
    base: str
    proc: subprocess.Popen[str]
    token: str | None

    def client(self, token: str | None = "default") -> httpx.Client:
        headers = {}
        tok = self.token if token == "default" else token
        if tok is not None:
            headers["Authorization"] = f"Bearer {tok}"
        return httpx.Client(base_url=self.base, headers=headers, timeout=20.0)


def wait_ready(base: str, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {stop(proc)}")
        try:
            httpx.get(f"{base}/openapi.json", timeout=1.0)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise AssertionError(f"the server never answered: {stop(proc)}") from None
            time.sleep(0.05)


@contextlib.contextmanager
def serving(
    store: str,
    *extra: str,
    app: str = f"{APP}:policies",
    token: str | None = TOKEN,
    env: dict[str, str] | None = None,
    count: int = 1,
) -> Iterator[Server]:
    """``stalwart serve`` in a process of its own, until the block ends (the
    first of ``count`` servers started side by side; see :func:`serving_many`)."""
    with serving_many(store, *extra, app=app, token=token, env=env, count=count) as servers:
        yield servers[0]


@contextlib.contextmanager
def serving_many(
    store: str,
    *extra: str,
    app: str = f"{APP}:policies",
    token: str | None = TOKEN,
    env: dict[str, str] | None = None,
    count: int = 1,
) -> Iterator[list[Server]]:
    """``count`` API processes on one store, started at once."""
    started: list[Server] = []
    try:
        for _ in range(count):
            port = free_port()
            args = ["serve", "--app", app, "--store", store, "--port", str(port), *extra]
            if token is not None and "--no-auth" not in extra and not env:
                args += ["--token", token]
            started.append(Server(f"http://127.0.0.1:{port}", spawn(args, env), token))
        for srv in started:
            wait_ready(srv.base, srv.proc)
        yield started
    finally:
        for srv in started:
            stop(srv.proc)


@pytest.fixture
def worker() -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    """Start ``stalwart worker`` processes on a store; stopped after the test."""
    procs: list[subprocess.Popen[str]] = []

    def run(store: str) -> subprocess.Popen[str]:
        proc = spawn(["worker", "--store", store, "--app", APP])
        procs.append(proc)
        return proc

    yield run
    for proc in procs:
        print(f"worker output: {stop(proc)}")  # shown when the test fails


@dataclass
class SSE:
    """One event of a run's stream: its type, its data (parsed JSON) and its id."""

    event: str
    data: Any
    id: str | None


def parse_event(text: str) -> SSE:
    """The event that ``text`` (one frame's ``field: value`` lines) holds;
    comment lines are passed over. A line that is not a field, or a frame
    without ``event`` or ``data``, fails the test."""
    fields: dict[str, str] = {}
    for line in text.strip().splitlines():
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(": ")
        assert sep, f"not a 'field: value' line: {line!r} in the frame {text!r}"
        fields[name] = value
    return SSE(fields["event"], json.loads(fields["data"]), fields.get("id"))


def read_events(
    response: httpx.Response, until: Callable[[SSE], bool], timeout: float = 60.0
) -> list[SSE]:
    """Events of a stream, until one satisfies ``until`` (included).

    Fails after ``timeout`` seconds (checked at each line: the server sends a
    keepalive comment when quiet, so a stuck run cannot hang the test)."""
    got: list[SSE] = []
    frame: list[str] = []
    deadline = time.monotonic() + timeout
    for line in response.iter_lines():
        if time.monotonic() > deadline:
            raise AssertionError(f"no awaited event in {timeout} s; got {got}")
        if line.startswith(":"):
            continue
        if line:
            frame.append(line)
            continue
        if frame:
            got.append(parse_event("\n".join(frame)))
            frame = []
            if until(got[-1]):
                return got
    return got


def wait_status(c: httpx.Client, run_id: str, status: str, timeout: float = 30.0) -> dict[str, Any]:
    """The run once it has ``status`` (polls; fails after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        run = c.get(f"/runs/{run_id}").json()
        if run["status"] == status:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} is {run['status']}, never {status}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def js() -> Path:
    """``js/``: the UI protocols' official clients (the AI SDK, AG-UI's
    HttpAgent) installed, by ``npm ci`` on first use."""
    from tests.npm import npm_dir

    return npm_dir(Path(__file__).with_name("js"))
