"""Finding runs on the inspector: the runs list searches the words of
inputs and results (the store's own full-text index), and two runs compare
side by side, a fork's page linking to the comparison with its origin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import client, seed_sync
from .find_app import seed_find
from .test_pages import run_ids
from .web_app import HOSTILE


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('find') / 'find.db'}"
    seed_sync(url, seed_find)
    return url


async def test_the_runs_list_finds_runs_by_the_words_of_their_values(found: str) -> None:
    async with client(found) as c:
        by_input = (await c.get("/runs", params={"q": "Refund"})).text
        by_result = (await c.get("/runs", params={"q": "21 c"})).text
        both = (await c.get("/runs", params={"q": "paris lyon", "status": "succeeded"})).text
        none = (await c.get("/runs", params={"q": "paris nantes"})).text
    assert sorted(run_ids(by_input)) == ["ticket-1", "ticket-1-b"]
    assert 'value="Refund"' in by_input  # the field keeps what was typed
    assert '<span class="field">inputs</span>' in by_input and "<mark>refund</mark>" in by_input
    assert run_ids(by_result) == ["ticket-1-b"]
    assert sorted(run_ids(both)) == ["ticket-1", "ticket-1-b"]
    assert run_ids(none) == []


@pytest.mark.parametrize("query", ['"', "*", 'NEAR("x', "AND OR", "a' OR '1'='1", HOSTILE])
async def test_hostile_queries_are_words_or_a_clear_400(found: str, query: str) -> None:
    async with client(found) as c:
        answer = await c.get("/runs", params={"q": query})
    assert answer.status_code in (200, 400)
    assert HOSTILE not in answer.text
    if answer.status_code == 400:
        assert "has no word" in answer.text


async def test_hostile_values_found_are_shown_as_text(found: str) -> None:
    async with client(found) as c:
        page = (await c.get("/runs", params={"q": "script alert pwned"})).text
    assert run_ids(page) == ["evil"]
    assert HOSTILE not in page and "<script>" not in page.split("<main>")[1]
    assert "&lt;<mark>script</mark>&gt;alert(&#39;pwned&#39;)" in page


async def test_a_forks_page_links_to_the_comparison_with_its_origin(found: str) -> None:
    async with client(found) as c:
        fork_page = (await c.get("/run", params={"id": "ticket-1-b"})).text
        origin_page = (await c.get("/run", params={"id": "ticket-1"})).text
    assert 'href="/compare?a=ticket-1&amp;b=ticket-1-b"' in fork_page
    assert "forked from" in fork_page and "forked from" not in origin_page


async def test_two_runs_compare_step_by_step_with_the_first_difference_linked(
    found: str,
) -> None:
    async with client(found) as c:
        page = (await c.get("/compare", params={"a": "ticket-1", "b": "ticket-1-b"})).text
        same = (await c.get("/compare", params={"a": "ticket-1", "b": "ticket-1"})).text
        other = (await c.get("/compare", params={"a": "ticket-1", "b": "ticket-2"})).text
        missing = await c.get("/compare", params={"a": "ticket-1", "b": "nope"})
        form = await c.get("/compare")
    rows = re.findall(r'<tr id="([^"]+)" class="([^"]*)"', page)
    assert [r[0] for r in rows] == ["inputs", "step-0", "step-1", "outcome"]
    assert [("differs" in r[1]) for r in rows] == [False, False, True, True]
    assert 'First difference: <a href="#step-1">weather (step 2)</a>' in page
    assert "first" in rows[2][1] and "first" not in rows[3][1]
    assert "21 C" in page and "20 C" in page
    assert "No difference" in same
    assert 'First difference: <a href="#inputs">inputs</a>' in other
    assert "no such step" in other  # ticket-2 made one weather call, ticket-1 two
    other_rows = dict(re.findall(r'<tr id="([^"]+)" class="([^"]*)"', other))
    assert "differs" in other_rows["step-0"]  # Paris against Nantes: the arguments differ
    assert "&#34;city&#34;:&#34;Nantes&#34;" in other
    assert missing.status_code == 404 and "nope" in missing.text
    assert form.status_code == 200 and 'name="a"' in form.text


async def test_an_encrypted_store_says_it_cannot_search_text(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from tests.stores.encryption.conftest import encrypted

    async with client(encrypted(f"sqlite:///{tmp_path / 'sealed.db'}")) as c:  # type: ignore[arg-type]
        plain = await c.get("/runs")
        asked = await c.get("/runs", params={"q": "refund"})
    assert plain.status_code == 200 and "disabled" in plain.text
    assert asked.status_code == 400 and "encrypted" in asked.text
