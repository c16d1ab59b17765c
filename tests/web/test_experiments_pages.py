"""The experiments pages over a store that holds two experiments and a
counterfactual: the index, a comparison case by case with its summary and
its filters, a counterfactual's runs against their forks, and a clear
answer for anything the address names that the store lacks."""

from __future__ import annotations

import pytest
from markupsafe import escape

from .conftest import client, seed_sync
from .evals_app import seed
from .web_app import HOSTILE


@pytest.fixture(scope="module")
def evals_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('evals') / 'evals.db'}"
    seed_sync(url, seed)
    return url


def _cells(page: str, case_id: str) -> str:
    """The row of ``case_id`` in a comparison, as HTML."""
    start = page.index(f'<td class="runid case">{escape(case_id)}</td>')
    return page[start : page.index("</tr>", start)]


async def test_the_index_lists_each_experiment_with_its_dataset_policy_and_verdicts(
    evals_store: str,
) -> None:
    async with client(evals_store) as c:
        page = (await c.get("/experiments")).text
    assert '<option value="v1" selected>' in page  # A: the older, B: the latest
    assert '<option value="v2" selected>' in page
    assert "tickets v1" in page and "answer_v2" in page
    assert 'href="/run?id=eval%3Av2"' in page  # the experiment's own run
    assert 'href="/experiments/compare?counterfactual=hostile"' in page


async def test_two_experiments_side_by_side_say_what_got_better_and_worse(
    evals_store: str,
) -> None:
    async with client(evals_store) as c:
        got = await c.get("/experiments/compare", params={"a": "v1", "b": "v2"})
    assert got.status_code == 200
    page = got.text
    assert "<b>1</b> better" in page and "<b>1</b> worse" in page and "<b>2</b> same" in page
    assert "v1: 3 of 4 passed" in page and "v2: 3 of 4 passed" in page
    a2 = _cells(page, "q-a2")
    assert 'class="verdict c-better">better' in a2  # v1 was wrong, v2 is right
    refund = _cells(page, "q-refund")
    assert 'class="verdict c-worse">worse' in refund
    assert "status s-failed" in refund  # B's run failed: its status beside its verdict
    assert refund.count('href="/run?id=eval%3Av') == 2  # both runs, on the run page
    assert str(escape(HOSTILE)) in page and HOSTILE not in page  # a case id is text


async def test_the_regressions_filter_keeps_the_worse_cases_only(evals_store: str) -> None:
    async with client(evals_store) as c:
        page = (await c.get("/experiments/compare?a=v1&b=v2&only=worse")).text
        swapped = (await c.get("/experiments/compare?a=v2&b=v1&only=worse")).text
    assert page.count('<td class="runid case">') == 1 and "q-refund" in page
    assert '<strong aria-current="page">regressions</strong>' in page
    assert swapped.count('<td class="runid case">') == 1 and "q-a2" in swapped


async def test_a_counterfactual_shows_each_recorded_run_against_its_fork(
    evals_store: str,
) -> None:
    async with client(evals_store) as c:
        page = (await c.get("/experiments/compare?counterfactual=hostile")).text
    row = _cells(page, "s-0")
    assert 'href="/run?id=s-0"' in row and 'href="/run?id=s-0.hostile"' in row
    assert "the reference" in row and 'class="verdict c-worse">worse' in row
    assert "&lt;script&gt;alert(" in row and "<script>" not in row  # the reason, as text
    assert "<b>2</b> worse" in page


@pytest.mark.parametrize(
    ("query", "code", "says"),
    [
        ("a=v1&b=nope", 404, "no experiment &#39;nope&#39;"),
        ("counterfactual=nope", 404, "no counterfactual &#39;nope&#39;"),
        ("a=v1", 400, "name two experiments"),
        ("a=v1&b=v2&only=%3Cscript%3E", 400, "is not one of"),
        (f"a={HOSTILE}&b=v2", 404, str(escape(f"no experiment {HOSTILE!r}"))),
    ],
)
async def test_what_the_store_lacks_is_a_clear_answer(
    evals_store: str, query: str, code: int, says: str
) -> None:
    async with client(evals_store) as c:
        got = await c.get(f"/experiments/compare?{query}")
    assert got.status_code == code
    assert says in got.text and "<script>" not in got.text.split("<main>", 1)[1]


async def test_a_store_without_experiments_says_how_to_make_one(sqlite_url: str) -> None:
    async with client(sqlite_url) as c:
        page = (await c.get("/experiments")).text
    assert "No experiment in this store yet" in page and "No counterfactual" in page
