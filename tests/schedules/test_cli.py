"""``stalwart schedules list | pause | resume | delete`` on a real SQLite file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner, Result

import stalwart as sw
from stalwart.cli.app import app
from stalwart.stores.base import ScheduleRecord

from ._policies import report

ENV = {"COLUMNS": "250", "STALWART_STORE": None, "NO_COLOR": "1"}


def invoke(*args: str) -> Result:
    return CliRunner(env=ENV).invoke(app, list(args))


async def _define(url: str) -> None:
    async with sw.Runner(url) as r:
        schedules = sw.Schedules(r)
        await schedules.define(report, name="nightly", cron="0 2 * * 1-5", timezone="Europe/Paris")
        await schedules.define(report, name="quarter", every=900, missed="skip", queue="reports")
        await schedules.pause("quarter")
        # A row written by someone else: markup and terminal controls in it
        # are shown as text, never obeyed.
        await r.store.create_schedule(
            ScheduleRecord(
                "[red]x[/red]",
                "\x1b]0;owned\x07policy",
                "{}",
                None,
                60,
                "UTC",
                "once",
                60.0,
                "q\x1b[2J",
                0,
                1_900_000_000,
            )
        )


def test_list_shows_every_schedule_escaped(sqlite_url: str) -> None:
    url = sqlite_url
    asyncio.run(_define(url))
    out = invoke("schedules", "list", "--store", url)
    assert out.exit_code == 0, out.output
    text = out.stdout
    assert "3 schedules in" in text
    nightly = next(line for line in text.splitlines() if "nightly" in line)
    assert "At 02:00 on Monday through Friday (Europe/Paris)" in nightly
    assert "active" in nightly
    quarter = next(line for line in text.splitlines() if "quarter" in line)
    assert "every 15 min" in quarter and "skip" in quarter and "paused" in quarter
    assert "[red]x[/red]" in text  # markup shown as text
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;owned\\x07policy" in text

    data = json.loads(invoke("schedules", "list", "--json", "--store", url).stdout)
    by_name = {s["name"]: s for s in data["schedules"]}
    assert sorted(by_name) == ["[red]x[/red]", "nightly", "quarter"]
    assert by_name["quarter"]["paused"] is True and by_name["quarter"]["every"] == 900
    assert by_name["nightly"]["cron"] == "0 2 * * 1-5"


def test_pause_resume_delete(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    asyncio.run(_define(url))
    out = invoke("schedules", "pause", "nightly", "--store", url)
    assert out.exit_code == 0 and "schedule nightly paused" in out.stdout
    out = invoke("schedules", "resume", "quarter", "--store", url)
    assert out.exit_code == 0 and "schedule quarter resumed; next tick" in out.stdout
    out = invoke("schedules", "delete", "[red]x[/red]", "--store", url)
    assert out.exit_code == 0 and "schedule [red]x[/red] deleted" in out.stdout
    data = json.loads(invoke("schedules", "list", "--json", "--store", url).stdout)
    assert {s["name"]: s["paused"] for s in data["schedules"]} == {
        "nightly": True,
        "quarter": False,
    }
    missing = invoke("schedules", "delete", "nope", "--store", url)
    assert missing.exit_code == 1
    assert missing.stderr.strip().startswith("error: no schedule 'nope' in sqlite:///")
    assert "Traceback" not in missing.output


def test_list_on_a_store_without_schedules(sqlite_url: str) -> None:
    url = sqlite_url

    async def make() -> None:
        async with sw.Runner(url):
            pass

    asyncio.run(make())
    out = invoke("schedules", "list", "--store", url)
    assert out.exit_code == 0 and "no schedule in" in out.stdout
