"""In a real browser, on SQLite and on PostgreSQL: pick two experiments,
compare them case by case, keep the regressions, open a case's run; a
counterfactual's runs against their forks; markup in case ids, reasons and
errors stays text; axe-core finds nothing serious or critical."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .axe import grave_violations
from .browser import chromium, inspector, require_browser
from .conftest import seed_sync
from .evals_app import seed
from .web_app import HOSTILE


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(require_browser()) as b:
        yield b


def test_compare_two_experiments_keep_the_regressions_and_open_a_run(
    browser: Any, store_url: str
) -> None:
    seed_sync(store_url, seed)
    dialogs: list[str] = []
    with inspector(store_url) as base:
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{base}/runs")
        page.get_by_role("link", name="Experiments").click()
        page.wait_for_url("**/experiments")
        assert grave_violations(page) == []
        page.get_by_label("A (before)").select_option("v1")
        page.get_by_label("B (after)").select_option("v2")
        page.get_by_role("button", name="Compare case by case").click()
        page.wait_for_url("**/experiments/compare?a=v1&b=v2")
        summary = page.get_by_role("region", name="Summary").inner_text()
        assert "1 better" in summary and "1 worse" in summary and "2 same" in summary
        cases = page.locator("table.cases tbody tr td.case")
        assert cases.count() == 4
        assert HOSTILE in cases.all_inner_texts()  # a case id of markup, shown as text
        assert grave_violations(page) == []

        page.get_by_role("link", name="regressions").click()
        page.wait_for_url("**only=worse")
        assert cases.all_inner_texts() == ["q-refund"]
        row = page.locator("table.cases tbody tr")
        assert "worse" in row.locator("td").nth(1).inner_text()
        b_run = row.locator("a.runid").nth(1)
        b_id = b_run.inner_text()
        assert b_id.startswith("eval:v2~")
        b_run.click()
        page.wait_for_url("**/run?id=*")
        assert page.locator("h1 .runid").inner_text() == b_id
        assert page.locator(".run-head .status").inner_text() == "failed"
        assert f"ValueError: {HOSTILE}" in page.locator(".values").inner_text()

        page.goto(f"{base}/experiments")
        page.get_by_role("link", name="hostile").click()
        page.wait_for_url("**counterfactual=hostile")
        assert page.locator("table.cases tbody tr").count() == 2
        assert "the reference" in page.locator("table.cases tbody tr").first.inner_text()
        assert grave_violations(page) == []
        assert page.locator("main script, main img").count() == 0
    assert dialogs == []
