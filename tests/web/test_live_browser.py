"""In a real browser: a run's live region sends back what it shows, keeps it
while the server says nothing moved (204), and shows a new step when one is
recorded, without a reload."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from tests.records import step_record
from tests.web.browser import chromium, inspector, require_browser

from stalwart.core.ledger import RunRecord
from stalwart.stores.base import this_host
from stalwart.stores.sqlite import SQLiteStore

OWNER = f"{this_host()}:{os.getpid()}:web-incremental-browser"
T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` on a thread of its own: Playwright's sync API holds an event
    loop on the test's thread."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def start(url: str) -> int:
    """A run held by a worker (this test), with one step; its fence."""
    store = SQLiteStore.from_url(url)
    await store.open()
    try:
        await store.create_run(RunRecord("r", "echo", "{}"))
        claimed = await store.claim("r", OWNER, 3600.0)
        assert claimed is not None
        await record(store, claimed.fence, "1")
        return claimed.fence
    finally:
        await store.close()


async def record(store: SQLiteStore, fence: int, key: str) -> None:
    now = time.time()
    output = json.dumps(f"output of {key}")
    await store.record_step("r", fence, step_record(key, output, name="echo", started_at=now))


async def record_alone(url: str, fence: int, key: str) -> None:
    store = SQLiteStore.from_url(url)
    await store.open()
    try:
        await record(store, fence, key)
    finally:
        await store.close()


def test_a_quiet_run_is_kept_and_a_new_step_is_shown(sqlite_url: str) -> None:
    executable = require_browser()
    url = sqlite_url
    fence = run_sync(start(url))
    with chromium(executable) as browser, inspector(url) as base:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        answers: list[tuple[str, int]] = []
        page.on(
            "response",
            lambda r: answers.append((r.url, r.status)) if "/run/live" in r.url else None,
        )
        page.goto(f"{base}/run?id=r")
        deadline = time.monotonic() + 30
        while sum(1 for _, status in answers if status == 204) < 3:
            assert time.monotonic() < deadline, answers
            page.wait_for_timeout(100)
        assert all("shown=" in address for address, _ in answers)
        assert page.locator(".steps .key").all_inner_texts() == ["1"]
        assert page.locator("pre", has_text="output of 1").count() == 1

        run_sync(record_alone(url, fence, "2"))
        page.locator(".steps .key", has_text="2").wait_for(timeout=15000)
        assert page.locator(".steps .key").all_inner_texts() == ["1", "2"]
        assert errors == []
