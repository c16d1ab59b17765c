"""Finding and comparing runs in a real browser (Debian's Chromium), on
SQLite and PostgreSQL: hostile queries and values stay text, the first
difference is one click away, and axe-core finds no serious violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .axe import grave_violations
from .browser import chromium, inspector, require_browser
from .conftest import seed_sync
from .find_app import seed_find
from .web_app import HOSTILE


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(require_browser()) as b:
        yield b


@pytest.fixture
def found(store_url: str) -> str:
    seed_sync(store_url, seed_find)
    return store_url


def _page(browser: Any, dialogs: list[str]) -> Any:
    page = browser.new_page()

    def dialog(d: Any) -> None:
        dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    return page


def test_a_text_search_finds_runs_and_shows_hostile_text_as_text(browser: Any, found: str) -> None:
    dialogs: list[str] = []
    with inspector(found) as base:
        page = _page(browser, dialogs)
        page.goto(f"{base}/runs")
        query = '"NEAR(refund* AND'
        page.get_by_label("Text").fill(query)
        page.get_by_role("button", name="Filter").click()
        page.wait_for_load_state()
        assert page.get_by_label("Text").input_value() == query
        assert page.locator("table.runs .runid").all_inner_texts() == []  # "near", "and": no run
        page.get_by_label("Text").fill("refund")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_load_state()
        assert sorted(page.locator("table.runs .runid").all_inner_texts()) == [
            "ticket-1",
            "ticket-1-b",
        ]
        assert set(page.locator(".hit mark").all_inner_texts()) == {"refund"}
        assert grave_violations(page) == []

        page.get_by_label("Text").fill("script pwned")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_load_state()
        assert page.locator("table.runs .runid").all_inner_texts() == ["evil"]
        assert "alert('pwned')" in page.locator(".hit").first.inner_text()
        page.wait_for_timeout(700)  # let the live refresh swap the list at least once
        assert page.locator("main script, main img").count() == 0
    assert dialogs == []
    assert HOSTILE


def test_a_fork_compares_with_its_origin_and_the_first_difference_is_linked(
    browser: Any, found: str
) -> None:
    dialogs: list[str] = []
    with inspector(found) as base:
        page = _page(browser, dialogs)
        page.goto(f"{base}/run?id=ticket-1-b")
        page.get_by_role("link", name="compare with it").click()
        page.wait_for_load_state()
        assert (
            page.locator("p.first-difference")
            .inner_text()
            .startswith("First difference: weather (step 2)")
        )
        page.get_by_role("link", name="weather (step 2)").click()
        assert page.url.endswith("#step-1")
        target = page.locator("tr:target")
        assert target.get_attribute("class") == "differs first"
        assert target.locator("pre").all_inner_texts() == ['"20 C"', '"21 C"']
        assert grave_violations(page) == []

        page.get_by_label("with run").fill("evil")
        page.get_by_role("button", name="Compare").click()
        page.wait_for_load_state()
        assert page.locator("p.first-difference a").inner_text() == "inputs"
        assert HOSTILE in page.locator("tr#inputs").inner_text()
        assert page.locator("main script, main img").count() == 0
    assert dialogs == []
