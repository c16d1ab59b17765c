"""``stalwart ui`` in a process of its own: the command a user types, on a
free port, until the block ends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from tests.conftest import free_port

from .conftest import start, stop, wait_http

__all__ = ["UI", "serving_ui"]


@dataclass(frozen=True)
class UI:
    base: str  # where the test reaches it: http://<address it is bound to>:<port>
    banner: str  # the line it printed at start


@contextlib.contextmanager
def serving_ui(store: str, *args: str, host: str = "127.0.0.1") -> Iterator[UI]:
    """``stalwart ui --store STORE --host HOST --port <free> ARGS``."""
    port = free_port()
    proc = start(
        ["-m", "stalwart.cli", "ui", "--store", store, "--host", host, "--port", str(port), *args]
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline().strip()
        base = f"http://{host}:{port}"
        assert banner, stop(proc)
        wait_http(f"{base}/static/live.js")
        yield UI(base, banner)
    finally:
        stop(proc)
