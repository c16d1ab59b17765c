"""A tool approval's decision sent over the HTTP API and the command line:
one that does not fit is refused naming the field (a 422 whose problem
names ``(body)['c1']['decision']``; the CLI's one line and exit code 1),
nothing is queued, and the run keeps waiting for a decision that fits.

The API runs in process over ASGI on a real SQLite file; the run is started
and executed by a runner of the test on the same file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

import httpx
from tests.cli.conftest import invoke

import stalwart as sw
from stalwart.api import create_app
from stalwart.llm import Agent
from stalwart.testing import ScriptedLLM, call

TOKEN = "approval-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@sw.policy(approval=True)
async def wire_money(to: str, amount: float) -> str:
    """Wire money."""
    return f"wired {amount} to {to}"


def _agent() -> Agent:
    model = ScriptedLLM([call("wire_money", _id="c1", to="Ada", amount=5.0), "done"])
    return Agent(model, tools=[wire_money], name="payer")


async def _waiting(runner: sw.Runner, run_id: str) -> str:
    while True:
        run = await runner.get_run(run_id)
        if run.status == "suspended" and run.waiting_for:
            return run.waiting_for
        assert run.status == "running" or run.status == "pending", run.error
        await asyncio.sleep(0.02)


async def test_a_bad_decision_over_http_is_a_422_naming_the_field(sqlite_url: str) -> None:
    api = create_app(sqlite_url, [wire_money], tokens=[TOKEN])
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(_agent(), question="Pay Ada", run_id="pay-1")
        signal = await _waiting(runner, "pay-1")
        path = f"/runs/pay-1/signals/{quote(signal, safe='')}"  # its "#" and ":" quoted
        async with api.router.lifespan_context(api):
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                bad = await c.post(path, json={"c1": {"decision": "sure"}}, headers=AUTH)
                assert bad.status_code == 422, bad.text
                fields = [p["field"] for p in bad.json()["fields"]]
                assert fields == ["(body)['c1']['decision']"]
                assert "is one of approve, deny, edit" in bad.json()["error"]
                run = await runner.get_run("pay-1")
                assert (run.status, run.waiting_for) == ("suspended", signal)
                good = await c.post(path, json=True, headers=AUTH)
                assert good.status_code == 202, good.text
        assert await handle.result(timeout=10) == "done"


async def test_a_bad_decision_from_the_command_line_names_the_field(
    sqlite_url: str, tmp_path: Path
) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        handle = await runner.start(_agent(), question="Pay Ada", run_id="pay-2")
        signal = await _waiting(runner, "pay-2")
        said = await asyncio.to_thread(
            invoke,
            "signal",
            "pay-2",
            signal,
            '{"c2": {"decision": "approve"}}',
            "--store",
            sqlite_url,
        )
        assert said.exit_code == 1, said.output
        assert f"signal {signal!r}['c2']: no call with this id waits" in " ".join(
            said.output.split()
        )
        run = await runner.get_run("pay-2")
        assert (run.status, run.waiting_for) == ("suspended", signal)
        await runner.signal("pay-2", signal, {"c1": {"decision": "deny", "reason": "no"}})
        assert await handle.result(timeout=10) == "done"


async def test_a_second_decision_before_the_run_takes_the_first_is_a_422_and_a_cli_error(
    sqlite_url: str,
) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        await runner.start(_agent(), question="Pay Ada", run_id="pay-3")
        signal = await _waiting(runner, "pay-3")
    # Nothing executes the run now: the first decision stays queued, untaken.
    api = create_app(sqlite_url, [wire_money], tokens=[TOKEN])
    path = f"/runs/pay-3/signals/{quote(signal, safe='')}"
    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            first = await c.post(path, json=True, headers=AUTH)
            assert first.status_code == 202, first.text
            second = await c.post(path, json=False, headers=AUTH)
            assert second.status_code == 422, second.text
            assert second.json()["code"] == "approval_error"
            assert (
                f"signal {signal!r}: a decision was sent to this wait already"
                in (second.json()["error"])
            )
    said = await asyncio.to_thread(
        invoke, "signal", "pay-3", signal, "false", "--store", sqlite_url
    )
    assert said.exit_code == 1, said.output
    lines = [line for line in said.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "a decision was sent to this wait already" in lines[0], lines
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        runner.register(_agent())
        (handle,) = await runner.recover()
        assert await handle.result(timeout=10) == "done"
        steps = {s.name: s for s in await runner.steps("pay-3")}
    assert steps["wire_money"].output == '"wired 5.0 to Ada"'  # the first decision was taken
