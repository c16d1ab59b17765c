"""Scraping a real /metrics endpoint, read with prometheus_client's own
parser: the harness of the metrics tests (workers, `stalwart serve`,
`stalwart ui`, a runner in the test's process)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.conftest import free_port
from tests.metrics import app

__all__ = [
    "APP",
    "Samples",
    "free_port",
    "read",
    "scrape",
    "start_cli",
    "start_worker",
    "stop",
    "total",
    "value",
]

#: The policies the commands under test serve (``--app``).
APP = str(Path(app.__file__))

#: Every sample of a scrape, by name and labels.
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def start_cli(*args: str) -> subprocess.Popen[str]:
    """``stalwart ARGS...`` in a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "stalwart.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_worker(
    url: str, port: int | None, *queues: str, lease: float | None = None
) -> subprocess.Popen[str]:
    args = ["worker", "--store", url, "--app", APP]
    if port is not None:
        args += ["--metrics-port", str(port)]
    for q in queues:
        args += ["--queue", q]
    if lease is not None:
        args += ["--lease", str(lease)]
    return start_cli(*args)


def stop(proc: subprocess.Popen[str], *, server: bool = False) -> str:
    """SIGTERM the process and check that it ended cleanly: with 0, or for an
    HTTP server (uvicorn raises the signal again once it has shut down) by
    that signal; what it wrote to stderr."""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode in ((0, -signal.SIGTERM) if server else (0,)), err
    return err


def read(port: int) -> Samples:
    """One scrape of ``http://127.0.0.1:PORT/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(proc: subprocess.Popen[str], port: int) -> Samples:
    """Every sample of the process's /metrics (waits for the endpoint to
    listen; fails with the process's stderr if it ends)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return read(port)
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None:
                pytest.fail(f"the process ended: {proc.communicate()[1]}")
            assert time.monotonic() < deadline, "/metrics never answered"
            time.sleep(0.05)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name`` over the series whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)
