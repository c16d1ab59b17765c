"""In a real browser: open the pages, approve a waiting run that a worker
process then finishes, and see hostile strings stay text."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .browser import chromium, inspector, require_browser
from .conftest import seed_sync
from .web_app import HOSTILE


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(require_browser()) as b:
        yield b


def test_approve_a_waiting_run_and_see_it_finish(
    browser: Any, sqlite_url: str, worker: Callable[[str], object]
) -> None:
    url = sqlite_url
    seed_sync(url)
    with inspector(url) as base:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/runs")
        assert page.locator("table.runs tbody tr").count() == 9
        page.get_by_role("link", name="ship-1", exact=True).click()
        page.wait_for_url("**/run?id=ship-1")
        assert page.locator(".run-head .status").inner_text() == "suspended"
        assert page.locator(".signal-name").first.inner_text() == "approve"
        worker(url)  # a worker process on the same SQLite file resumes it
        page.get_by_role("button", name="Approve").click()
        page.wait_for_url(lambda u: "/run?id=ship-1&answered=ship-1" in u)
        assert "Sent 'approve' to run 'ship-1'." in page.locator(".flash").inner_text()
        # No reload: the live region updates by itself when the run finishes.
        page.locator(".run-head .status", has_text="succeeded").wait_for(timeout=15000)
        assert page.locator("pre.result").inner_text() == '"shipped the parcel"'
        assert page.locator("form.signal").count() == 0  # no actions on a finished run
        page.goto(f"{base}/waiting")
        assert "ship-1" not in page.locator("main").inner_text()
        assert errors == []


def test_hostile_strings_render_as_text_and_no_script_runs(browser: Any, seeded: str) -> None:
    dialogs: list[str] = []
    with inspector(seeded) as base:
        page = browser.new_page()

        def dialog(d: Any) -> None:
            dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", dialog)
        for path in ("/runs", "/waiting"):
            page.goto(base + path)
            assert HOSTILE in page.locator("main").inner_text()
        page.goto(f"{base}/runs")
        page.get_by_role("link", name=HOSTILE, exact=True).click()  # the run whose id is markup
        page.wait_for_load_state()
        assert page.locator("h1 .runid").inner_text() == HOSTILE
        page.goto(f"{base}/run?id=agent-1")
        bubbles = page.locator(".conversation .bubble")
        assert bubbles.count() == 4  # the tool result is folded under the call
        assert HOSTILE in bubbles.last.inner_text()
        page.goto(f"{base}/run?id=broken-1")
        assert f"ValueError: {HOSTILE}" in page.locator(".values").inner_text()
        page.wait_for_timeout(700)  # let live refresh swap regions at least once
        assert page.locator("main script, main img").count() == 0
    assert dialogs == []
