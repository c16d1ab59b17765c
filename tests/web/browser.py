"""A real headless Chromium (Debian's) driven by Playwright, and a live inspector.

Shared by the browser tests and the screenshot script. Playwright drives the
system chromium (``executable_path``): nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from tests.conftest import free_port

from .conftest import start, stop, wait_http


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def require_browser() -> str:
    """The chromium executable; skip without it (or Playwright), fail under CI."""
    why = None
    path = chromium_path()
    if path is None:
        why = "no chromium on PATH (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            why = "Playwright is not installed (pip install playwright)"
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run under CI: {why}")
        pytest.skip(why)
    assert path is not None
    return path


@contextlib.contextmanager
def inspector(
    url: str, app: str | None = None, prices: dict[str, dict[str, float]] | None = None
) -> Iterator[str]:
    """``stalwart.web.serve`` in a process of its own; yields its base URL.

    ``app``: a test module whose ``POLICIES`` the inspector is given (to
    read inputs' names and flows' graphs from). ``prices``: a price table
    in its JSON form (``stalwart ui --prices``)."""
    port = free_port()
    policies = "()" if app is None else f"__import__({app!r}, fromlist=['POLICIES']).POLICIES"
    table = "None" if prices is None else f"__import__('stalwart.llm').llm.read_prices({prices!r})"
    proc: subprocess.Popen[str] = start(
        ["-c", f"from stalwart.web.app import create_app; import uvicorn; "
         f"uvicorn.run(create_app({url!r}, refresh=0.3, policies={policies}, prices={table}), "
         f"host='127.0.0.1', port={port}, log_level='warning')"]
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/runs")
        yield base
    finally:
        stop(proc)


@contextlib.contextmanager
def chromium(executable: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
