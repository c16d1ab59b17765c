"""Every `--json` output has one shape (docs/cli.md, "JSON output"), read back
from real `python -m stalwart` processes: an object whose first field is
`store`; a listing's things under their plural with `more`; one thing under
its name; recorded values parsed; a run's fields named alike everywhere."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw

from .conftest import RUN_FIELDS, run_cli

APP = """
import stalwart as sw


@sw.policy
async def refund(ctx: sw.Context, order: str, amount: int) -> str:
    ok = await ctx.wait_for("approve", about={"order": order})
    return "refunded" if ok else "refused"


@sw.policy
async def report(region: str = "eu", days: int = 7) -> str:
    return f"{region}/{days}"
"""


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("json-shapes")
    (folder / "shop.py").write_text(APP)
    sys.path.insert(0, str(folder))
    try:
        import shop  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(folder))

    async def make() -> None:
        async with sw.Runner(f"sqlite:///{folder / 'ledger.db'}") as runner:
            runner_schedules = sw.Schedules(runner)
            await runner.start(shop.refund, "A-42", amount=120, run_id="refund-42")
            await runner.start(shop.refund, "A-43", amount=80, run_id="refund-43")
            await runner_schedules.define(
                shop.report, name="weekly", every=3600, inputs={"region": "us", "days": 30}
            )
            for _ in range(500):
                runs = [await runner.get_run(i) for i in ("refund-42", "refund-43")]
                if all(r.status == "suspended" for r in runs):
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("the runs did not suspend")

    asyncio.run(make())
    sys.modules.pop("shop", None)
    return folder


def _json(place: Path, *argv: str) -> Any:
    store = {"STALWART_STORE": f"sqlite:///{place / 'ledger.db'}"}
    done = run_cli(place, *argv, "--json", env=store)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert isinstance(document, dict)
    assert next(iter(document)) == "store"  # every document names its store first
    assert document["store"] == f"sqlite:///{place / 'ledger.db'}"
    return document


def test_listings_give_their_things_under_their_plural_with_more(place: Path) -> None:
    listed = _json(place, "runs", "list")
    assert [r["id"] for r in listed["runs"]] == ["refund-43", "refund-42"]
    assert listed["more"] is False and listed["next"] is None
    paged = _json(place, "runs", "list", "--limit", "1")
    assert paged["more"] is True and isinstance(paged["next"], str)
    waiting = _json(place, "runs", "waiting", "--limit", "1")
    assert [r["id"] for r in waiting["runs"]] == ["refund-42"] and waiting["more"] is True
    assert _json(place, "runs", "waiting")["more"] is False
    schedules = _json(place, "schedules", "list")
    assert [s["name"] for s in schedules["schedules"]] == ["weekly"]
    assert schedules["more"] is False


def test_a_run_has_the_same_fields_and_values_in_every_command(place: Path) -> None:
    listed = next(r for r in _json(place, "runs", "list")["runs"] if r["id"] == "refund-42")
    waiting = next(r for r in _json(place, "runs", "waiting")["runs"] if r["id"] == "refund-42")
    shown = _json(place, "runs", "show", "refund-42")
    assert set(listed) == RUN_FIELDS
    assert {k: waiting[k] for k in RUN_FIELDS} == listed
    assert {k: shown["run"][k] for k in RUN_FIELDS} == listed
    assert listed["waiting_for"] == "approve"


def test_recorded_inputs_are_parsed_values_in_runs_and_schedules(place: Path) -> None:
    run = _json(place, "runs", "show", "refund-42")["run"]
    assert run["inputs"] == {"args": ["A-42", 120], "kwargs": {}}
    assert run["unreadable"] == []
    (schedule,) = _json(place, "schedules", "list")["schedules"]
    assert schedule["inputs"] == {"args": ["us", 30], "kwargs": {}}
    assert schedule["unreadable"] == []


def test_a_count_is_one_object(place: Path) -> None:
    counted = _json(place, "runs", "count")
    assert counted["total"] == 2
    assert counted["by_status"]["suspended"] == 2
    assert counted["by_queue"] == {"default": 2}
