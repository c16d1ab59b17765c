"""The versions an operator names on the command line (``versions set-latest``,
``versions retire``, ``runs pin --version``, ``worker --version``) are checked
first: an empty one (which would read as "any code"), one with spaces or
control characters, or a huge one is a usage error naming the argument."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import stalwart as sw

from .conftest import invoke

BAD = ["", "two words", "tab\there", "esc\x1b[31m", "x" * 201]


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"

    async def make() -> None:
        async with sw.Runner(url) as runner:
            await runner.store.set_latest("v1")

    asyncio.run(make())
    return url


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("command", [("versions", "set-latest"), ("versions", "retire")])
def test_a_version_an_operator_may_not_name_is_refused(
    url: str, command: tuple[str, str], bad: str
) -> None:
    result = invoke(*command, bad, "--store", url)
    assert result.exit_code == 2, result.output
    assert "VERSION: a version is 1 to 200 printable characters" in result.output
    listed = invoke("versions", "list", "--json", "--store", url)
    assert [v["version"] for v in json.loads(listed.stdout)["versions"]] == ["v1"]


@pytest.mark.parametrize("bad", BAD)
def test_a_run_is_never_pinned_to_a_version_that_may_not_be_named(url: str, bad: str) -> None:
    result = invoke(
        "runs", "pin", "r", "--version", bad, "--app", "tests.runner.test_routing", "--store", url
    )
    assert result.exit_code == 2, result.output
    assert "--version: a version is 1 to 200" in result.output


def test_a_worker_refuses_an_empty_version(url: str) -> None:
    result = invoke("worker", "--app", "tests.runner.test_routing", "--version", "", "--store", url)
    assert result.exit_code == 2, result.output
    assert "--version: a version is 1 to 200" in result.output
