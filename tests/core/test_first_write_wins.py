"""First write wins (S3) meets the identity check (S5): when another
executor of the same run recorded a *different* call at a step's key before
this one could, the run fails with a NonDeterminismError that names the run,
the step and both calls, whether this execution's own call succeeded or
failed, and the ledger keeps the record that won.

"Another executor" is played by the step itself: before it finishes, it
writes the rival record at its own key into the run's SQLite file, as a
second worker holding the same claim would (tests/core/test_pins.py has the
rivals that recorded the *same* call).
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

import stalwart as sw

URLS: dict[str, str] = {}  # run id -> the SQLite URL of its ledger
RIVALS: dict[str, tuple[str, str, str | None]] = {}  # run id -> (run, key, output) to copy
FAILS: set[str] = set()  # run ids whose own execution of the step raises


@pytest.fixture(autouse=True)
def _reset() -> None:
    for registry in (URLS, RIVALS, FAILS):
        registry.clear()


def _copy_step(url: str, source: tuple[str, str, str | None], run_id: str) -> None:
    """Write the step ``source`` names into ``run_id``'s ledger, as it is
    stored (compact arguments stay compact), with its ``output`` if given:
    what another executor of the run would have written first."""
    run, key, output = source
    db = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
    with db:
        cursor = db.execute("SELECT * FROM steps WHERE run_id = ? AND key = ?", (run, key))
        columns = [c[0] for c in cursor.description]
        row = dict(zip(columns, cursor.fetchone(), strict=True))
        row["run_id"] = run_id
        if output is not None:
            row["output"] = output
        marks = ", ".join("?" * len(columns))
        db.execute(f"INSERT INTO steps ({', '.join(columns)}) VALUES ({marks})", list(row.values()))
    db.close()


async def _rival_goes_first(ctx: sw.Context) -> None:
    rival = RIVALS.pop(ctx.run_id, None)
    if rival is not None:
        await asyncio.to_thread(_copy_step, URLS[ctx.run_id], rival, ctx.run_id)
    if ctx.run_id in FAILS:
        raise ValueError("mine")


@sw.policy
async def contested(ctx: sw.Context, x: int) -> int:
    await _rival_goes_first(ctx)
    return x * 2


@sw.policy
async def other(x: int) -> int:
    return x + 1


@sw.policy
async def contest_root(x: int) -> str:
    try:
        return f"value {await contested(x)}"
    except ValueError as exc:  # the step's own failure, were it to reach the caller
        return f"ValueError {exc}"


async def _lose_to(url: str, rival_call: sw.Policy[..., int], rival_x: int, *, fails: bool) -> str:
    """The error of a run whose step ``contested(21)`` loses its record to a
    rival that recorded ``rival_call(rival_x)`` (its value) at the same key."""
    async with sw.Runner(url, policies=[contest_root]) as runner:

        @sw.policy(name="model_root")
        async def model_root() -> int:
            return await rival_call(rival_x)

        await runner.run(model_root, run_id="model")
        [model] = [s for s in await runner.steps("model") if s.name == rival_call.name]
        RIVALS["lost"] = ("model", model.key, "-1")
        URLS["lost"] = url
        if fails:
            FAILS.add("lost")
        with pytest.raises(sw.NonDeterminismError) as caught:
            await runner.run(contest_root, 21, run_id="lost")
        run = await runner.get_run("lost")
        assert run.status == "failed"
        assert run.error is not None and "does not match its record" in run.error
        # The ledger keeps the rival's record: the first write won.
        [kept] = [s for s in await runner.steps("lost") if s.key == model.key]
        assert (kept.name, kept.args_hash, kept.output) == (model.name, model.args_hash, "-1")
    return str(caught.value)


def _both_calls(text: str, recorded: str, now: str) -> None:
    first, rec, cur = text.split("\n")[:3]
    assert first == "step 1 of run lost does not match its record:"
    assert rec == f"  recorded: {recorded}"
    assert cur == f"  now:      {now}"
    assert "ctx.patched" in text  # and how to change code safely


async def test_a_success_that_loses_to_other_arguments_fails_the_run_naming_both_calls(
    sqlite_url: str,
) -> None:
    text = await _lose_to(sqlite_url, contested, 22, fails=False)
    name = contested.name
    _both_calls(text, f'{name}({{"*":[22]}})', f'{name}({{"*":[21]}})')


async def test_a_success_that_loses_to_another_policy_fails_the_run_naming_both_calls(
    sqlite_url: str,
) -> None:
    text = await _lose_to(sqlite_url, other, 21, fails=False)
    _both_calls(text, f'{other.name}({{"*":[21]}})', f'{contested.name}({{"*":[21]}})')


async def test_a_failure_that_loses_to_other_arguments_fails_the_run_naming_both_calls(
    sqlite_url: str,
) -> None:
    text = await _lose_to(sqlite_url, contested, 22, fails=True)
    name = contested.name
    _both_calls(text, f'{name}({{"*":[22]}})', f'{name}({{"*":[21]}})')


async def test_a_failure_that_loses_to_another_policy_fails_the_run_naming_both_calls(
    sqlite_url: str,
) -> None:
    text = await _lose_to(sqlite_url, other, 21, fails=True)
    _both_calls(text, f'{other.name}({{"*":[21]}})', f'{contested.name}({{"*":[21]}})')


# -- calls recorded as what is new since an earlier step (core/stepargs.py) ------------------
HISTORY = ["an earlier message, long enough to be kept", "and a second one, kept as well"]


@sw.policy
async def converse(ctx: sw.Context, history: list[str]) -> int:
    if len(history) > len(HISTORY):
        await _rival_goes_first(ctx)
    return len(history)


@sw.policy
async def converse_too(ctx: sw.Context, history: list[str]) -> int:
    return len(history)


@sw.policy
async def conversation(last: str, too: bool = False) -> int:
    await converse(HISTORY)
    try:
        return await (converse_too if too else converse)([*HISTORY, last])
    except ValueError:
        return -1


@pytest.mark.parametrize("fails", [False, True], ids=["succeeds", "fails"])
@pytest.mark.parametrize(
    ("theirs", "too"), [("theirs", False), ("mine", True)], ids=["arguments", "policy"]
)
async def test_a_call_that_loses_to_another_extended_call_shows_both_whole(
    sqlite_url: str, theirs: str, too: bool, fails: bool
) -> None:
    """Both records refer to step 1 for the start of their list: the message
    still shows each call's arguments whole, read back from the ledger."""
    async with sw.Runner(sqlite_url, policies=[conversation]) as runner:
        await runner.run(conversation, theirs, too, run_id="model")
        db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
        [(stored,)] = db.execute("SELECT args FROM steps WHERE run_id = 'model' AND key = '2'")
        db.close()
        assert HISTORY[0] not in stored  # recorded as what is new since step 1
        RIVALS["lost"] = ("model", "2", None)
        URLS["lost"] = sqlite_url
        if fails:
            FAILS.add("lost")
        with pytest.raises(sw.NonDeterminismError) as caught:
            await runner.run(conversation, "mine", run_id="lost")
        assert (await runner.get_run("lost")).status == "failed"
    first, recorded, now = str(caught.value).split("\n")[:3]
    assert first == "step 2 of run lost does not match its record:"
    whole = ",".join(f'"{m}"' for m in HISTORY)
    rival = converse_too if too else converse
    assert recorded == f'  recorded: {rival.name}({{"*":[[{whole},"{theirs}"]]}})'
    assert now == f'  now:      {converse.name}({{"*":[[{whole},"mine"]]}})'


@sw.policy
async def swallowing_root(x: int) -> str:
    try:
        return f"value {await contested(x)}"
    except Exception as exc:  # a policy that swallows whatever its step raises
        return f"swallowed {type(exc).__name__}"


async def test_a_failure_that_loses_to_an_unreadable_record_fails_the_run(
    sqlite_url: str,
) -> None:
    """A rival recorded the same call's failure, but its error cannot be
    read back: the run stops with the store's word, naming the run and the
    step, however the policy handles errors; it never ends succeeded."""
    async with sw.Runner(sqlite_url, policies=[contest_root, swallowing_root]) as runner:
        FAILS.add("model")
        URLS["model"] = sqlite_url
        assert await runner.run(contest_root, 21, run_id="model") == "ValueError mine"
        [model] = [s for s in await runner.steps("model") if s.name == contested.name]
        db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), timeout=30)
        with db:
            db.execute(
                "UPDATE steps SET error = ? WHERE run_id = ? AND key = ?",
                ("{not json", "model", model.key),
            )
        db.close()
        RIVALS["lost"] = ("model", model.key, None)
        URLS["lost"] = sqlite_url
        FAILS.add("lost")
        with pytest.raises(sw.CorruptedRecord) as caught:
            await runner.run(swallowing_root, 21, run_id="lost")
        assert f"step {model.key} of run 'lost'" in str(caught.value)
        run = await runner.get_run("lost")
        assert run.status == "failed"
        assert run.error is not None and f"step {model.key} of run 'lost'" in run.error
