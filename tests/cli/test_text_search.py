"""``runs list --text WORDS``: runs whose inputs, result or error hold every word."""

from __future__ import annotations

import asyncio
import json

import stalwart as sw

from .conftest import invoke, ok


@sw.policy
async def answer(question: str) -> str:
    return f"answered: {question}"


def _seed(url: str) -> None:
    async def go() -> None:
        async with sw.Runner(url, policies=[answer]) as runner:
            await runner.run(answer, "where is my refund", run_id="a")
            await runner.run(answer, "track parcel 1234", run_id="b")

    asyncio.run(go())


def test_runs_list_keeps_the_runs_that_hold_every_word(sqlite_url: str) -> None:
    _seed(sqlite_url)

    def ids(*words: str) -> list[str]:
        doc = json.loads(ok("runs", "list", "--text", *words, "--json", "--store", sqlite_url))
        return [r["id"] for r in doc["runs"]]

    assert ids("REFUND") == ["a"]
    assert ids("answered") == ["b", "a"]  # a word of the results
    assert ids('"parcel" 1234*') == ["b"]
    assert ids("refund parcel") == []


def test_a_text_with_no_word_is_a_usage_error_naming_the_option(sqlite_url: str) -> None:
    result = invoke("runs", "list", "--text", '"*"', "--store", sqlite_url)
    assert result.exit_code == 2
    assert "--text" in result.output and "has no word" in result.output
