"""In a real browser: a run of megabyte values opens as a short page whose
"the whole value" link shows the value whole, and a wait's details show on
"Waiting for a human"."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from .browser import chromium, inspector, require_browser
from .test_long_values import BIG, seed_long
from .test_waits import waiting


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(require_browser()) as b:
        yield b


def on_a_thread(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine off the test's thread, where Playwright holds a loop."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, make()).result()


def test_a_cut_value_opens_whole_and_a_wait_shows_its_details(
    browser: Any, sqlite_url: str
) -> None:
    text = on_a_thread(lambda: seed_long(sqlite_url))
    on_a_thread(lambda: waiting(sqlite_url))
    with inspector(sqlite_url) as base:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/run?id=long-1")
        assert "more characters" in page.locator(".values .cut").inner_text()
        page.locator(".values .cut a").click()
        page.wait_for_url("**/run/value?*")
        assert json.loads(page.locator("body").inner_text())["args"] == [text]
        assert len(text) == BIG

        page.goto(f"{base}/waiting")
        about = page.locator(".waiting-run", has_text="refund-42").locator(".about pre")
        assert json.loads(about.inner_text())["order"] == "A-42"
        assert errors == []
