"""The inspector and tags: the runs list filters by one (``key:value``),
and a run's page shows its tags as text, however hostile the values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

import stalwart as sw

from .browser import chromium, inspector, require_browser
from .conftest import client
from .test_browser_values import on_a_thread
from .web_app import HOSTILE


@sw.policy
async def ticket(n: int) -> int:
    return n


async def _seed(url: str) -> None:
    async with sw.Runner(url, policies=[ticket]) as runner:
        await runner.run(ticket, 1, run_id="evil", tags={"note": HOSTILE, "customer": "c-42"})
        await runner.run(ticket, 2, run_id="plain", tags={"customer": "c-7"})


@pytest.fixture
def tagged(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'tags.db'}"
    on_a_thread(lambda: _seed(url))
    return url


async def test_the_runs_list_filters_by_a_tag(tagged: str) -> None:
    async with client(tagged) as c:
        page = (await c.get("/runs", params={"tag": "customer:c-42"})).text
        assert "evil" in page and "plain" not in page
        assert 'value="customer:c-42"' in page  # the filter keeps what was typed
        page = (await c.get("/runs", params={"tag": f"note:{HOSTILE}"})).text
        assert "evil" in page and "plain" not in page
        assert HOSTILE not in page and escape(HOSTILE) in page
        bad = await c.get("/runs", params={"tag": "no-colon"})
        assert bad.status_code == 400 and "not key:value" in bad.text


async def test_a_runs_page_shows_hostile_tags_escaped(tagged: str) -> None:
    async with client(tagged) as c:
        page = (await c.get("/run", params={"id": "evil"})).text
    assert HOSTILE not in page
    assert escape(f"note={HOSTILE}") in page
    assert escape("customer=c-42") in page


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(require_browser()) as b:
        yield b


def test_hostile_tags_stay_text_in_a_browser(browser: Any, tagged: str) -> None:
    dialogs: list[str] = []
    with inspector(tagged) as base:
        page = browser.new_page()

        def dialog(d: Any) -> None:
            dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", dialog)
        page.goto(f"{base}/runs")
        page.get_by_label("Tag").fill(f"note:{HOSTILE}")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_load_state()
        assert page.get_by_label("Tag").input_value() == f"note:{HOSTILE}"
        page.get_by_role("link", name="evil", exact=True).click()
        page.wait_for_load_state()
        assert page.locator(".tags").inner_text() == f"customer=c-42 note={HOSTILE}"
        page.wait_for_timeout(700)  # let live refresh swap regions at least once
        assert page.locator("main script, main img").count() == 0
    assert dialogs == []
