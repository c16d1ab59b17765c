"""Schedules rows edited by hand: every field is checked when a row is read,
a bad row fails that schedule alone (named, with the field), and
``stalwart schedules list`` shows the good rows beside the corrupt one."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from tests.conftest import PG_URL, drop_schema, pg_schema_url, require_postgres
from tests.schedules._policies import report
from tests.schedules.test_define import T0, Clock
from tests.schedules.test_ticking import serving, settled
from typer.testing import CliRunner, Result

import stalwart as sw
from stalwart.cli.app import app
from stalwart.core.errors import CorruptedRecord
from stalwart.schedules import tick_run_id

ENV = {"COLUMNS": "250", "STALWART_STORE": None, "NO_COLOR": "1"}


def edit(url: str, sql: str, *params: object) -> None:
    """Change the ``schedules`` table behind the store's back, as a person would."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            db.execute(sql.replace("{t}", ""), params)
        return
    import psycopg

    schema = parse_qs(urlsplit(url).query)["schema"][0]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.replace("{t}", f'"{schema}".').replace("?", "%s"), params)


async def _two(url: str, clock: Clock) -> None:
    async with sw.Runner(url) as r:
        schedules = sw.Schedules(r, clock=clock)
        await schedules.define(report, name="good", every=60)
        await schedules.define(report, name="bad", every=60)


@pytest.mark.parametrize(
    ("column", "value", "field"),
    [("missed", "always", "missed"), ("grace", -5.0, "grace"), ("every", 0, "every")],
)
async def test_a_bad_value_fails_that_schedule_alone_by_name_and_field(
    store_url: str, caplog: pytest.LogCaptureFixture, column: str, value: object, field: str
) -> None:
    clock = Clock(T0 + 1)
    await _two(store_url, clock)
    edit(store_url, f"UPDATE {{t}}schedules SET {column} = ? WHERE name = 'bad'", value)
    clock.t = T0 + 61
    with caplog.at_level(logging.ERROR, logger="stalwart.runner"):
        async with serving(store_url, clock) as r:
            schedules = sw.Schedules(r, clock=clock)
            assert await settled(r, "good", 1) == [tick_run_id("good", T0 + 60)]
            await asyncio.sleep(0.3)  # many polls: the bad one is reported once
            assert [x.id for x in await r.list_runs() if x.id.startswith("bad@")] == []
            with pytest.raises(CorruptedRecord, match=rf"schedule 'bad'.*{field}"):
                await schedules.get("bad")
    errors = [m for m in caplog.messages if "'bad'" in m]
    assert len(errors) == 1, errors
    assert field in errors[0]


async def test_a_nan_grace_fails_that_schedule_on_postgres(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # SQLite stores a NaN as NULL (a type error, caught before); PostgreSQL
    # keeps the NaN itself, which no comparison would ever catch.
    require_postgres()
    schema = f"t_nangrace_{tmp_path.name[-8:]}"
    url = pg_schema_url(schema)
    try:
        clock = Clock(T0 + 1)
        await _two(url, clock)
        edit(url, "UPDATE {t}schedules SET grace = 'NaN' WHERE name = 'bad'")
        clock.t = T0 + 61
        with caplog.at_level(logging.ERROR, logger="stalwart.runner"):
            async with serving(url, clock) as r:
                sw.Schedules(r, clock=clock)  # ticks while it serves
                assert await settled(r, "good", 1) == [tick_run_id("good", T0 + 60)]
                assert [x.id for x in await r.list_runs() if x.id.startswith("bad@")] == []
        errors = [m for m in caplog.messages if "'bad'" in m]
        assert len(errors) == 1 and "grace" in errors[0] and "nan" in errors[0], errors
    finally:
        drop_schema(schema)


def _list(url: str, *more: str) -> Result:
    return CliRunner(env=ENV).invoke(app, ["schedules", "list", "--store", url, *more])


def test_list_shows_the_good_rows_and_the_corrupt_one_with_its_reason(sqlite_url: str) -> None:
    url = sqlite_url
    asyncio.run(_two(url, Clock(T0 + 1)))
    edit(url, "UPDATE {t}schedules SET missed = ? WHERE name = 'bad'", "\x1b[2Jnever")
    out = _list(url)
    assert out.exit_code == 1, out.output  # documented: 1 when a row is corrupt
    lines = out.stdout.splitlines()
    good = next(line for line in lines if line.strip("│ ").startswith("good "))
    assert "every 1 min" in good and "active" in good
    bad = next(line for line in lines if line.strip("│ ").startswith("bad "))
    assert "corrupt" in bad
    assert "missed" in out.stdout and "\x1b" not in out.output  # the reason, escaped
    assert "1 corrupt" in out.stdout

    as_json = _list(url, "--json")
    assert as_json.exit_code == 1, as_json.output
    data = json.loads(as_json.stdout)
    by_name = {s["name"]: s for s in data["schedules"]}
    assert by_name["good"]["every"] == 60 and "corrupt" not in by_name["good"]
    assert "missed" in by_name["bad"]["corrupt"]

    # Deleting it reads nothing of it; the list is sound again.
    gone = CliRunner(env=ENV).invoke(app, ["schedules", "delete", "bad", "--store", url])
    assert gone.exit_code == 0, gone.output
    assert _list(url).exit_code == 0


def test_list_of_sound_rows_still_exits_0(sqlite_url: str) -> None:
    url = sqlite_url
    asyncio.run(_two(url, Clock(T0 + 1)))
    out = _list(url)
    assert out.exit_code == 0, out.output
    assert "corrupt" not in out.stdout
