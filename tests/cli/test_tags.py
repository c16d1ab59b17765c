"""``--tag KEY=VALUE`` on ``runs list``, ``runs count`` and ``runs prune``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import stalwart as sw

from .conftest import invoke, ok


@sw.policy
async def job(n: int) -> int:
    return n


def _seed(url: str) -> None:
    async def go() -> None:
        async with sw.Runner(url, policies=[job]) as runner:
            await runner.run(job, 1, run_id="a", tags={"customer": "c-42", "tier": "gold"})
            await runner.run(job, 2, run_id="b", tags={"customer": "c-42"})
            await runner.run(job, 3, run_id="c", tags={"customer": "c-7"})

    asyncio.run(go())


def test_runs_list_keeps_the_runs_with_every_tag_given(sqlite_url: str) -> None:
    _seed(sqlite_url)
    doc = json.loads(ok("runs", "list", "--tag", "customer=c-42", "--json", "--store", sqlite_url))
    assert [r["id"] for r in doc["runs"]] == ["b", "a"]
    assert doc["runs"][1]["tags"] == {"customer": "c-42", "tier": "gold"}
    args = ("runs", "list", "--tag", "customer=c-42", "--tag", "tier=gold", "--json")
    doc = json.loads(ok(*args, "--store", sqlite_url))
    assert [r["id"] for r in doc["runs"]] == ["a"]
    counted = ok("runs", "count", "--tag", "customer=c-42", "--json", "--store", sqlite_url)
    count = json.loads(counted)
    assert count["total"] == 2


def test_runs_prune_by_tag_deletes_only_those_runs(sqlite_url: str) -> None:
    _seed(sqlite_url)
    out = ok("runs", "prune", "--keep", "0", "--tag", "customer=c-42", "--store", sqlite_url)
    assert "pruned 2 finished runs" in out
    doc = json.loads(ok("runs", "list", "--json", "--store", sqlite_url))
    assert [r["id"] for r in doc["runs"]] == ["c"]


@pytest.mark.parametrize(
    ("given", "named"),
    [("customer", "not key=value"), ("bad key=v", "'bad key'"), ("k=", "--tag['k']")],
)
def test_a_tag_option_that_is_not_a_tag_is_a_usage_error_naming_it(
    sqlite_url: str, given: str, named: str
) -> None:
    result = invoke("runs", "list", "--tag", given, "--store", sqlite_url)
    assert result.exit_code == 2
    assert named in result.output


def test_runs_show_prints_tags_as_text_not_markup(sqlite_url: str) -> None:
    async def go() -> None:
        async with sw.Runner(sqlite_url, policies=[job]) as runner:
            await runner.run(job, 1, run_id="h", tags={"note": "[bold red]x[/]"})

    asyncio.run(go())
    out = ok("runs", "show", "h", "--store", sqlite_url)
    assert "note=[bold red]x[/]" in out


def test_one_key_given_twice_with_two_values_is_a_usage_error(sqlite_url: str) -> None:
    result = invoke("runs", "list", "--tag", "k=1", "--tag", "k=2", "--store", sqlite_url)
    assert result.exit_code == 2 and "'k' given twice" in result.output


def test_runs_list_shows_a_tags_column_only_when_a_run_has_tags(sqlite_url: str) -> None:
    _seed(sqlite_url)

    def header(out: str) -> str:
        (line,) = [x for x in out.splitlines() if "policy" in x and "status" in x]
        return line

    out = ok("runs", "list", "--store", sqlite_url)
    assert "tags" in header(out) and "tier=gold" in out
    out = ok("runs", "list", "--tag", "customer=c-7", "--store", sqlite_url)
    assert "customer=c-7" in out

    async def untagged() -> None:
        async with sw.Runner(sqlite_url, policies=[job]) as runner:
            await runner.run(job, 4, run_id="plain")

    asyncio.run(untagged())
    out = ok("runs", "list", "--limit", "1", "--store", sqlite_url)
    assert "plain" in out and "tags" not in header(out)


def test_runs_export_by_tag_writes_every_run_with_the_tags(sqlite_url: str, tmp_path: Path) -> None:
    _seed(sqlite_url)
    out = tmp_path / "c42.jsonl"
    printed = ok("runs", "export", "--tag", "customer=c-42", "-o", str(out), "--store", sqlite_url)
    assert "exported 2 run(s)" in printed
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(x["run"]["id"] for x in lines if x.get("type") == "run") == ["a", "b"]
    # None match: an empty export, not an error.
    none = ok("runs", "export", "--tag", "customer=nobody", "--store", sqlite_url)
    assert json.loads(none.splitlines()[0])["runs"] == 0


@pytest.mark.parametrize("args", [(), ("a", "--tag", "customer=c-42")])
def test_runs_export_takes_a_run_or_tags_not_both_nor_neither(
    sqlite_url: str, args: tuple[str, ...]
) -> None:
    _seed(sqlite_url)
    result = invoke("runs", "export", *args, "--store", sqlite_url)
    assert result.exit_code == 2
    assert "a RUN or --tag KEY=VALUE" in result.output
