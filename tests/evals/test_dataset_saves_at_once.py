"""Processes saving the same dataset name at the same moment each get a
version of their own, holding exactly their cases: none lost, none mixed,
on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.crash import spawn, wait_for_line

import stalwart as sw
from stalwart.evals import DatasetStore

from .saving import CASES

SAVERS = 4


def _saved(url: str) -> dict[int, tuple[str, list[str], list[object]]]:
    """Each saved version of ``shared``: its description, case ids and the
    references its cases hold."""

    async def read() -> dict[int, tuple[str, list[str], list[object]]]:
        async with sw.Runner(url) as runner:
            datasets = DatasetStore(runner.store)
            found = {}
            for info in await datasets.versions("shared"):
                d = await datasets.load("shared", info.version)
                found[d.version] = (d.description, [c.id for c in d.cases],
                                    [c.expected for c in d.cases])  # fmt: skip
            return found

    return asyncio.run(read())


def test_processes_saving_one_name_at_once_get_distinct_whole_versions(
    tmp_path: Path, store_url: str
) -> None:
    if store_url.startswith("sqlite"):  # the file and its tables exist before the race
        asyncio.run(_open(store_url))
    go = tmp_path / "go"
    savers = [spawn("-m", "tests.evals.saving", store_url, f"p{i}", go) for i in range(SAVERS)]
    for proc in savers:
        wait_for_line(proc, "ready")
    go.touch()
    said: dict[str, int] = {}
    for i, proc in enumerate(savers):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        said[f"p{i}"] = int(out.split()[-1])
    assert sorted(said.values()) == list(range(1, SAVERS + 1))  # one version each
    versions = _saved(store_url)
    assert sorted(versions) == sorted(said.values())  # none lost
    for who, version in said.items():
        description, ids, expected = versions[version]
        assert description == who
        assert ids == [f"{who}-{n}" for n in range(CASES)]  # its own cases, whole
        assert expected == [who] * CASES


async def _open(url: str) -> None:
    async with sw.Runner(url):
        pass
