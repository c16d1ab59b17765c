"""Behaviours the contract promises, each on real stores.

Each test names the clause it pins.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from tests.hostile import write_row
from tests.records import step_record

import stalwart as sw
from stalwart.core.ledger import RunRecord, StepRecord
from stalwart.core.policy import current_context
from stalwart.flow import AsyncFlow, AsyncNode

EXECUTED: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    EXECUTED.clear()
    OUTAGE.reset()


async def _status(runner: sw.Runner, run_id: str, wanted: str) -> None:
    deadline = time.monotonic() + 10
    while (await runner.get_run(run_id)).status != wanted:
        assert time.monotonic() < deadline, f"run {run_id!r} never became {wanted}"
        await asyncio.sleep(0.01)


# -- S8: a refused write stops the execution, even under `except Exception` -------------------
async def _take_over(url: str, run_id: str) -> None:
    """Another worker claims the run now (its holder's lease looked expired)."""
    write_row(url, "UPDATE runs SET lease_expires_at = 0 WHERE id = ?", run_id)
    async with sw.Runner(url, serving=False) as thief:
        assert thief.store is not None
        assert await thief.store.claim(run_id, "elsewhere:1:thief", 30.0) is not None


@sw.policy
async def tick(i: int, url: str) -> int:
    EXECUTED.append(f"tick:{i}")
    if i == 1:
        await _take_over(url, "forgiving")
    return i


@sw.policy
async def forgiving(ctx: sw.Context, n: int, url: str) -> int:
    total = 0
    for i in range(n):
        try:
            total += await tick(i, url)
        except Exception:  # an agent that tolerates a failing tool: very common
            total -= 1
    return total


async def test_a_replaced_worker_executes_no_step_after_its_first_refused_write(
    store_url: str,
) -> None:
    """S8: once a step write is refused (another worker holds the
    run), this execution stops. A policy catching ``Exception`` around its
    tool calls swallows the StaleLeaseError, and the stale worker goes on
    executing every later step (side effects the new owner will redo)."""
    async with sw.Runner(store_url, poll_interval=0.05) as runner:
        handle = await runner.start(forgiving, 6, store_url, run_id="forgiving")
        with pytest.raises(TimeoutError):  # the thief holds the run now
            await handle.result(timeout=1.0)
    assert EXECUTED == ["tick:0", "tick:1"], f"the stale worker went on: {EXECUTED}"


# -- S6: a failed step write never leaves a hole ------------------------------------------------
class Outage:
    """Another connection (as good as another process) holding the SQLite
    file's write lock: the store is unavailable until it ends."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.started = False
        self.over = threading.Event()
        self._conn: sqlite3.Connection | None = None

    def begin(self, path: str) -> None:
        if self.started:
            return  # once per test: a replay finds the store up
        self.started = True
        conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN IMMEDIATE")
        self._conn = conn

    def end(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.execute("ROLLBACK")
            conn.close()
        self.over.set()

    def end_in(self, seconds: float) -> None:
        timer = threading.Timer(seconds, self.end)
        timer.daemon = True
        timer.start()


OUTAGE = Outage()


@sw.policy
async def grab_the_file(path: str) -> str:
    """Step 1: as it ends, another process takes the write lock for a moment
    (a backup, an admin's transaction), so its record cannot be written."""
    EXECUTED.append("grab")
    if not OUTAGE.started:
        OUTAGE.begin(path)
        OUTAGE.end_in(0.3)
    return "first"


@sw.policy
async def after_the_outage() -> str:
    """Step 2 takes a while: by the time it ends the outage is over."""
    EXECUTED.append("after")
    while not OUTAGE.over.is_set():
        await asyncio.sleep(0.01)
    return "second"


@sw.policy
async def tolerant(ctx: sw.Context, path: str) -> list[str]:
    out = []
    try:
        out.append(await grab_the_file(path))
    except Exception as exc:  # a tool error the agent can live with
        out.append(f"skipped: {type(exc).__name__}")
    out.append(await after_the_outage())
    return out


async def test_a_step_whose_record_failed_is_not_followed_by_recorded_steps(
    tmp_path: Path,
) -> None:
    """S6 and S14: recovery sees a prefix, never a middle, and a store that is
    down is retried. A transient failure recording step 1 reaches the policy as
    an ordinary exception; the policy catches it, step 2 runs and is recorded,
    and the run succeeds on a ledger holding step 2 without step 1."""
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}?busy_timeout=0.05"
    async with sw.Runner(url, poll_interval=0.05) as runner:
        result = await runner.run(tolerant, str(path), run_id="hole")
        keys = sorted(s.key for s in await runner.steps("hole"))
    assert keys == ["1", "2"], f"a hole in the ledger: {keys}"
    assert result == ["first", "second"]


# -- S14: a store outage inside a TaskGroup is still a store outage ---------------------------
@sw.policy
async def locks_then_works(path: str) -> str:
    """Its record meets the write lock another process holds (briefly)."""
    EXECUTED.append("locks")
    OUTAGE.begin(path)
    return "done"


async def _awaited(step: Awaitable[str]) -> str:
    return await step


@sw.policy
async def fans_out(ctx: sw.Context, path: str) -> list[str]:
    try:
        async with asyncio.TaskGroup() as tg:  # S1 names TaskGroup as a supported shape
            task = tg.create_task(_awaited(locks_then_works(path)))
    finally:
        OUTAGE.end()  # the other process commits: the store answers again
    return [task.result()]


async def test_a_store_outage_inside_a_task_group_does_not_fail_the_run(tmp_path: Path) -> None:
    """S14: a store that is down is retried. Raised inside the policy's own
    TaskGroup, StoreUnavailable arrives wrapped in an ExceptionGroup, which the
    runner takes for the policy's failure: the run is failed for good."""
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}?busy_timeout=0.05"
    async with sw.Runner(url, poll_interval=0.05) as runner:
        assert await runner.run(fans_out, str(path), run_id="tg") == ["done"]


# -- S12: pruning keeps what an unfinished parent needs (both stores) --------------------------
@sw.policy
async def doubles(x: int) -> int:
    return 2 * x


@sw.policy
async def fans_to_kids(ctx: sw.Context) -> int:
    return sum(await ctx.map(doubles, [1, 2, 3], queue="kids"))


async def test_prune_keeps_the_finished_children_of_an_unfinished_parent(store_url: str) -> None:
    """S12: "pruning never removes a run that an unfinished run still needs".
    The children finished, their parent has not read them yet; PostgreSQL's
    prune deletes them anyway (SQLite's checks the parent), and the parent
    then fails."""
    async with sw.Runner(store_url, poll_interval=0.02, queues=["default"], serving=True) as runner:
        await runner.start(fans_to_kids, run_id="p")
        await _status(runner, "p", "suspended")
    async with sw.Runner(
        store_url, poll_interval=0.02, queues=["kids"], policies=[doubles], serving=True
    ) as kids:
        for i in range(3):
            assert await sw.RunHandle(kids, f"p~1/{i}").result(timeout=10) == 2 * (i + 1)
        assert (await kids.get_run("p")).status not in ("succeeded", "failed", "cancelled")
        assert await kids.prune(older_than=0) == 0
    async with sw.Runner(
        store_url, poll_interval=0.02, policies=[fans_to_kids], serving=True
    ) as runner:
        assert await sw.RunHandle(runner, "p").result(timeout=10) == 12


# -- replay suppresses only what was delivered before ------------------------------
@sw.policy
async def leaf(x: int) -> int:
    return x + 1


@sw.policy
async def branch(x: int) -> int:
    return await leaf(x) * 10  # a policy calling a policy: the usual agent shape


@sw.policy
async def reports_after_a_sleep(ctx: sw.Context) -> int:
    value = await branch(1)
    await ctx.sleep(0.3)  # durable: the run suspends, then resumes by replay
    ctx.emit(f"woke with {value}")  # never emitted before the suspension
    return value


async def test_an_event_emitted_after_the_replayed_prefix_is_delivered(store_url: str) -> None:
    """Events of the replayed prefix are not delivered again, but
    an event the run emits for the first time must be. The replay is taken to
    last until as many records were replayed as the run has; the child step
    under a replayed step is never visited, so the run seems to replay for
    ever and its new event is dropped."""
    async with sw.Runner(store_url, poll_interval=0.02, inline_sleep=0.0) as runner:
        handle = await runner.start(reports_after_a_sleep, run_id="late")
        seen = [e async for e in handle.events()]
    emitted = [e.value for e in seen if isinstance(e, sw.Emitted)]
    assert emitted == ["woke with 20"]


# -- S14: nothing loops -------------------------------------------------------------------------
_GENERATOR_EXIT_APP = """
import asyncio, sys
import stalwart as sw

EXECUTED = []


@sw.policy
async def closes_a_generator() -> int:
    EXECUTED.append(1)
    raise GeneratorExit("raised by the tool's own code, not a coroutine being closed")


@sw.policy
async def calls_closer(ctx: sw.Context) -> str:
    try:
        await closes_a_generator()
    except Exception as exc:
        return f"caught {type(exc).__name__}"
    return "no error"


async def main() -> None:
    async with sw.Runner(sys.argv[1], poll_interval=0.02) as runner:
        handle = await runner.start(calls_closer, run_id="g")
        try:
            print("result", await handle.result(timeout=1.0))
        except BaseException as exc:
            print("error", type(exc).__name__)
    print("executions", len(EXECUTED))


asyncio.run(main())
"""


def test_a_generator_exit_raised_by_a_step_is_executed_once(sqlite_url: str) -> None:
    """S14: a step's failure, BaseExceptions included, is executed once. A
    GeneratorExit from a tool's code leaves the run running and unheld; the
    runner takes it back at once and executes the tool again, hundreds of
    times a second. (In a subprocess: the loop also leaves CPython's recursion
    bookkeeping broken, which crashes pytest's own reporting afterwards.)"""
    done = subprocess.run(
        [sys.executable, "-c", _GENERATOR_EXIT_APP, sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines.get("executions") == "1", f"the step executed {lines.get('executions')} times"


@sw.policy
async def careful_tool() -> int:
    EXECUTED.append("careful_tool")
    raise ValueError("recorded")


@sw.policy
async def waits_then_reads(ctx: sw.Context) -> str:
    with contextlib.suppress(ValueError):
        await careful_tool()
    await ctx.wait_for("go")
    return "finished"


@pytest.mark.parametrize("kind", ["StoreUnavailable", "StaleLeaseError"])
async def test_a_recorded_error_cannot_make_every_worker_spin(store_url: str, kind: str) -> None:
    """S13 and S14: a row is data, and nothing loops. A step's recorded error
    naming one of the engine's own store errors is rebuilt as that class;
    replaying it, the runner takes the run for "store down" or "fenced out",
    drops it and claims it again, for ever, in every worker."""
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        await runner.start(waits_then_reads, run_id="spin")
        await _status(runner, "spin", "suspended")
    hostile = f'{{"type":"stalwart.errors.{kind}","message":"edited row"}}'
    write_row(
        store_url, "UPDATE steps SET error = ? WHERE run_id = ? AND key = ?", hostile, "spin", "1"
    )
    async with sw.Runner(
        store_url, poll_interval=0.02, policies=[waits_then_reads], serving=True
    ) as runner:
        await runner.signal("spin", "go")
        with contextlib.suppress(Exception):
            await sw.RunHandle(runner, "spin").result(timeout=1.0)
        rec = await runner.get_run("spin")
    assert rec.status == "failed" and rec.fence <= 3, f"{rec.status}, claimed {rec.fence} times"


# -- one run id, one run; inputs compared as values --------------------------------
@sw.policy
async def count_tags(tags: set[int]) -> int:
    EXECUTED.append("count_tags")
    return len(tags)


@sw.policy
async def price_list(prices: dict[int, str]) -> int:
    return len(prices)


async def test_equal_inputs_that_iterate_differently_are_the_same_run(sqlite_url: str) -> None:
    """The contract: "inputs are compared as values (key order ... must not
    matter)". Sets, and dicts with non-string keys, are recorded in iteration
    order, which differs between equal values (and between processes, with
    hash randomization): retrying the same start raises InputMismatchError."""
    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(count_tags, {1, 9}, run_id="tags") == 2
        assert await runner.run(count_tags, {9, 1}, run_id="tags") == 2
        assert await runner.run(price_list, {1: "a", 2: "b"}, run_id="prices") == 2
        assert await runner.run(price_list, {2: "b", 1: "a"}, run_id="prices") == 2
    assert EXECUTED == ["count_tags"]


async def test_stream_refuses_an_empty_run_id(sqlite_url: str) -> None:
    """An empty run id is refused, never silently replaced by a
    random one (the side effect would run twice). ``start`` and ``run``
    refuse it; ``stream`` still turns it into a fresh id."""
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(ValueError, match="run id"):
            async for _ in runner.stream(count_tags, {1}, run_id=""):
                pass
        assert await runner.list_runs() == []
    assert EXECUTED == []


FLAKY: list[int] = []


@sw.policy
async def flaky() -> str:
    FLAKY.append(1)
    if len(FLAKY) < 3:
        raise ConnectionError("try again")
    return "ok"


async def test_the_policy_given_to_start_is_the_one_that_runs(sqlite_url: str) -> None:
    """S13, one name one policy: ``p.with_settings(retries=2)`` is another
    policy under p's name. Started on a runner that knows p, it is neither
    refused (DuplicatePolicy) nor run: p runs, without the retries."""
    FLAKY.clear()
    async with sw.Runner(sqlite_url, policies=[flaky], serving=True) as runner:
        patient = flaky.with_settings(retries=2, backoff=0)
        try:
            outcome = await runner.run(patient, run_id="patient")
        except sw.DuplicatePolicy:
            return  # refusing the namesake is a fine answer too
    assert outcome == "ok"


# -- S4: replay raises the same error that the live call raised --------------------------------
@sw.policy
async def reads_config(path: str) -> str:
    EXECUTED.append("reads_config")
    with open(path) as f:  # a tool doing blocking I/O, as many do
        return f.read()


@sw.policy
async def config_or_default(ctx: sw.Context, path: str) -> str:
    try:
        text = await reads_config(path)
    except FileNotFoundError:
        text = "default"
    await ctx.wait_for("go")
    return text


async def test_a_builtin_os_error_replays_as_itself(store_url: str, tmp_path: Path) -> None:
    """S4: a recorded error replays as the same error. FileNotFoundError is a
    builtin, yet it comes back as a StepError (its message is not rebuilt from
    its args), so the policy's ``except FileNotFoundError`` that ran live does
    not catch it on replay, and the run fails."""
    missing = str(tmp_path / "missing.toml")
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        await runner.start(config_or_default, missing, run_id="cfg")
        await _status(runner, "cfg", "suspended")
        await runner.signal("cfg", "go")
        assert await sw.RunHandle(runner, "cfg").result(timeout=10) == "default"
    assert EXECUTED == ["reads_config"]


class PaymentDeclined(Exception):
    """A custom error with a field the caller reads."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code


sw.register_type(PaymentDeclined)


@sw.policy
async def charge(amount: int) -> str:
    EXECUTED.append("charge")
    raise PaymentDeclined(402, "insufficient funds")


@sw.policy
async def checkout(ctx: sw.Context, amount: int) -> str:
    try:
        await charge(amount)
        outcome = "paid"
    except PaymentDeclined as exc:
        outcome = f"declined with {exc.code}"
    await ctx.wait_for("go")
    return outcome


async def test_a_registered_error_replays_with_its_fields(store_url: str) -> None:
    """S4: a registered exception is rebuilt with ``cls.__new__`` and its args,
    so the fields its ``__init__`` set are missing on replay: live the policy
    read ``exc.code``; replayed, the same line raises AttributeError."""
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        await runner.start(checkout, 10, run_id="pay")
        await _status(runner, "pay", "suspended")
        await runner.signal("pay", "go")
        assert await sw.RunHandle(runner, "pay").result(timeout=10) == "declined with 402"
    assert EXECUTED == ["charge"]


class QuotaExceeded(Exception):
    """Raised by a tool; nobody registered it."""


@sw.policy
async def call_api() -> str:
    EXECUTED.append("call_api")
    raise QuotaExceeded("daily quota")


@sw.policy
async def api_or_cache(ctx: sw.Context) -> str:
    try:
        source = await call_api()
    except QuotaExceeded:
        source = "cache"
    except sw.StepError:
        source = "a StepError"
    EXECUTED.append(f"branch: {source}")  # code between steps runs live and on replay
    await ctx.wait_for("go")
    return source


async def test_an_unregistered_error_is_the_same_live_and_replayed(store_url: str) -> None:
    """S2 and S4: replay must take the branches the live run took. Live, the
    caller sees the tool's own QuotaExceeded; replayed, a StepError, which the
    same ``except`` does not catch. Either both see the class or both see the
    StepError (raising what the ledger holds, live too, keeps them equal)."""
    async with sw.Runner(store_url, poll_interval=0.02) as runner:
        await runner.start(api_or_cache, run_id="api")
        await _status(runner, "api", "suspended")
        await runner.signal("api", "go")
        await sw.RunHandle(runner, "api").result(timeout=10)
    live, replayed = (e for e in EXECUTED if e.startswith("branch"))
    assert live == replayed


# -- a corrupted row names the run and the field -----------------------------------
@pytest.mark.parametrize("inputs", ["[1, 2]", '{"args": 5, "kwargs": {}}', '{"args": []}'])
async def test_run_inputs_of_the_wrong_shape_are_a_corrupted_record(
    sqlite_url: str, inputs: str
) -> None:
    """The contract: "corrupted run inputs ... name the run and the field".
    Inputs that are JSON but not ``{"args": [...], "kwargs": {...}}`` fail the
    run with a bare TypeError or KeyError ("list indices must be integers")."""
    async with sw.Runner(sqlite_url, serving=False) as runner:
        await runner.enqueue(doubles, 1, run_id="shape")
    write_row(sqlite_url, "UPDATE runs SET inputs = ? WHERE id = 'shape'", inputs)
    async with sw.Runner(
        sqlite_url, poll_interval=0.02, policies=[doubles], serving=True
    ) as runner:
        with pytest.raises(sw.CorruptedRecord, match=r"inputs of run 'shape'"):
            await sw.RunHandle(runner, "shape").result(timeout=10)


# -- S6 with durability=group: a rolled-back batch is not acknowledged history ------------------
GATE: list[asyncio.Event] = []


@sw.policy
async def small_step(i: int) -> int:
    await GATE[0].wait()
    return i


@sw.policy
async def huge_step() -> str:
    await GATE[0].wait()
    return "x" * 1_000_000


@sw.policy
async def steady(ctx: sw.Context) -> int:
    first = await small_step(1)
    await asyncio.sleep(0.05)
    return first + await small_step(2)


@sw.policy
async def bulky(ctx: sw.Context) -> int:
    return len(await huge_step())


async def test_a_neighbours_failed_write_does_not_erase_an_acknowledged_step(
    tmp_path: Path,
) -> None:
    """S6: a run's ledger is always a prefix. With ``durability=group`` step 1
    of run x is acknowledged while its transaction is still open; run y's
    record in the same transaction hits a full disk (SQLITE_FULL, here from
    ``max_page_count``), and the whole transaction is rolled back, x's step
    with it, silently. x goes on, records step 2, and succeeds on a ledger
    with a hole: step 2 without step 1."""
    GATE[:] = [asyncio.Event()]
    url = f"sqlite:///{tmp_path / 'ledger.db'}?durability=group"
    async with sw.Runner(url, poll_interval=0.05) as runner:
        assert runner.store is not None
        db: sqlite3.Connection = runner.store.db  # type: ignore[attr-defined]
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        db.execute(f"PRAGMA max_page_count = {pages + 60}")  # room for small records only
        x = await runner.start(steady, run_id="x")
        await runner.start(bulky, run_id="y")
        await asyncio.sleep(0.05)
        GATE[0].set()  # both steps end in the same loop turn: one transaction
        assert await x.result(timeout=10) == 3
        keys = sorted(s.key for s in await runner.steps("x"))
        db.execute("PRAGMA max_page_count = 1073741823")
    assert keys == ["1", "2"], f"a hole in run x's ledger: {keys}"


# -- S14 on PostgreSQL: one run's bad record fails only that run -------------------------------
async def test_one_unrecordable_step_does_not_fail_the_steps_batched_with_it(
    store_url: str,
) -> None:
    """S14: errors stay where they belong. Records that arrive while a write
    is in flight go out together; a record PostgreSQL refuses for good (a NUL
    in a policy or patch name) fails the whole statement, and every record
    batched with it, of other runs too, gets the same permanent StoreError:
    those runs are failed."""
    async with sw.Runner(store_url, serving=False) as runner:
        store = runner.store
        assert store is not None
        fences = {}
        for run_id in ("a", "b", "c"):
            await store.create_run(RunRecord(run_id, "p", '{"args":[],"kwargs":{}}'))
            claimed = await store.claim(run_id, "me:1:x", 30.0)
            assert claimed is not None
            fences[run_id] = claimed.fence
        now = time.time()

        def record(name: str) -> StepRecord:
            return step_record("1", name=name, started_at=now)

        _, _, c = await asyncio.gather(
            store.record_step("a", fences["a"], record("fine")),  # in flight...
            store.record_step("b", fences["b"], record("bad\x00name")),  # ...these two
            store.record_step("c", fences["c"], record("fine")),  # batch together
            return_exceptions=True,
        )
    assert isinstance(c, StepRecord), f"run c's good record failed with run b's error: {c}"


@sw.policy
async def answers(ctx: sw.Context, question: sw.Message) -> str:
    EXECUTED.append("answers")
    return f"re: {question.text}"


async def test_a_message_input_rebuilt_by_a_retrying_client_is_the_same_run(
    sqlite_url: str,
) -> None:
    """A run id is an idempotency key and inputs compare as values.
    A client that retries ``start(p, Message.user(q), run_id=...)`` builds a
    new Message, whose random id differs: InputMismatchError. Step identity
    already leaves message ids out (identity.identity_json); run identity
    does not."""
    async with sw.Runner(sqlite_url) as runner:
        first = await runner.run(answers, sw.Message.user("hi"), run_id="conv-1")
        again = await runner.run(answers, sw.Message.user("hi"), run_id="conv-1")
    assert first == again == "re: hi"
    assert EXECUTED == ["answers"]


# -- a corrupted flow journal names where it is ---------------------------------------
class First(AsyncNode):
    name = "first"

    async def exec_async(self, prep_res: Any) -> int:
        return 1

    async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> None:
        shared["x"] = exec_res


class WaitsForGo(AsyncNode):
    name = "waits"

    async def exec_async(self, prep_res: Any) -> Any:
        ctx = current_context()
        assert ctx is not None
        return await ctx.wait_for("go")


def _journaled_flow() -> AsyncFlow:
    first = First()
    first >> WaitsForGo()  # PocketFlow's edge syntax
    flow = AsyncFlow(start=first)
    flow.name = "journaled"  # type: ignore[attr-defined]
    return flow


async def test_a_corrupted_flow_record_is_a_corrupted_record(sqlite_url: str) -> None:
    """The contract: "a corrupted record fails the run with a message naming
    run, step and field". A flow's post record that is JSON but not a journal
    entry fails the run with a bare TypeError ("list indices must be
    integers")."""
    flow = _journaled_flow()
    async with sw.Runner(sqlite_url, poll_interval=0.02) as runner:
        await runner.start(flow, shared={}, run_id="fl")
        await _status(runner, "fl", "suspended")
    write_row(sqlite_url, "UPDATE steps SET output = '[]' WHERE name = 'stalwart.flow.post'")
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[flow], serving=True) as runner:
        await runner.signal("fl", "go", 5)
        with pytest.raises(sw.CorruptedRecord) as info:
            await sw.RunHandle(runner, "fl").result(timeout=10)
    assert "'fl'" in str(info.value) and "1.walk.1.post" in str(info.value)
