"""Fixtures for the inspector: seeded stores, an ASGI client, real processes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from stalwart.llm import Price
from stalwart.web import create_app

from .web_app import seed

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite store holding one run of each kind (see ``web_app.seed``); read only."""
    url = f"sqlite:///{tmp_path_factory.mktemp('web') / 'seeded.db'}"
    seed_sync(url)
    return url


def seed_sync(url: str, seeding: Callable[[str], Awaitable[None]] = seed) -> None:
    """``seeding`` (``web_app.seed`` by default) on a thread of its own:
    Playwright's sync API holds an event loop on the test's thread, where
    ``asyncio.run`` may not start another."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, seeding(url)).result()


@contextlib.asynccontextmanager
async def client(
    url: str,
    *,
    token: str | None = None,
    hosts: tuple[str, ...] | None = ("127.0.0.1",),
    policies: tuple[object, ...] = (),
    prices: Mapping[str, Price] | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the inspector's ASGI app, its lifespan run."""
    app = create_app(url, token=token, hosts=hosts, policies=policies, prices=prices)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # This checkout's source first: the server runs the code under test.
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT / "src"), str(ROOT)))},
    )


def stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the process; its stderr, for a failing test to show."""
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


def wait_http(url: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture
def worker() -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    """Start worker processes on a store (``worker(url)``); stopped after the test."""
    procs: list[subprocess.Popen[str]] = []

    def run(url: str) -> subprocess.Popen[str]:
        proc = start(["-m", "tests.web.web_app", url])
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "worker ready", stop(proc)
        procs.append(proc)
        return proc

    yield run
    for proc in procs:
        stop(proc)
