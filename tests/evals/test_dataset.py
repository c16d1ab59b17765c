"""Datasets: cases drawn from recorded runs by policy, status, time, tags and
a predicate, or written by hand; saved in the store as versions that never
change; written and read as JSON Lines, a bad line refused naming where."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import stalwart as sw
from stalwart.core.errors import CorruptedRecord
from stalwart.evals import (
    Dataset,
    DatasetCase,
    DatasetStore,
    Outcome,
    Selection,
    cases_from_runs,
)


@sw.policy
async def answer(question: str, strict: bool = False) -> dict[str, str]:
    """Answer, failing on a question about refunds."""
    if "refund" in question:
        raise ValueError("refunds are not handled")
    return {"answer": question.upper()}


@sw.policy
async def other(question: str) -> str:
    return question


async def _record(runner: sw.Runner) -> float:
    for i in range(6):
        tags = {"channel": "chat" if i % 2 else "email"}
        await runner.run(answer, f"where is A{i}", run_id=f"q-{i}", tags=tags)
    middle = time.time()
    with pytest.raises(ValueError):
        await runner.run(answer, "a refund please", run_id="q-refund", strict=True)
    await runner.run(other, "not this one", run_id="o-0")
    return middle


async def test_cases_are_drawn_by_policy_status_time_tags_and_predicate(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[answer, other]) as runner:
        middle = await _record(runner)
        every = await cases_from_runs(runner, Selection(policy="answer"))
        assert [c.id for c in every] == [f"q-{i}" for i in range(6)]  # oldest first
        first = every[0]
        assert (first.args, first.kwargs) == (["where is A0"], {})  # as recorded
        assert (first.expected, first.status, first.source) == ({"answer": "WHERE IS A0"},
                                                                 "succeeded", "q-0")  # fmt: skip
        assert first.tags == {"channel": "email"}

        email = await cases_from_runs(runner, Selection(policy="answer", tags={"channel": "email"}))
        assert [c.id for c in email] == ["q-0", "q-2", "q-4"]

        failed = await cases_from_runs(runner, Selection(policy="answer", status="failed"))
        assert [(c.id, c.status) for c in failed] == [("q-refund", "failed")]
        assert "refunds are not handled" in (failed[0].error or "")

        later = await cases_from_runs(runner, Selection(policy="answer", status=None, since=middle))
        assert [c.id for c in later] == ["q-refund"]

        def has_a3(inputs: dict[str, object], outcome: Outcome) -> bool:
            return "A3" in str(inputs["args"]) or outcome.status == "failed"

        picked = await cases_from_runs(
            runner, Selection(policy="answer", status=None, where=has_a3)
        )
        assert [c.id for c in picked] == ["q-3", "q-refund"]
        newest_two = await cases_from_runs(runner, Selection(policy="answer", limit=2))
        assert [c.id for c in newest_two] == ["q-4", "q-5"]


async def test_a_saved_version_never_changes_and_the_same_cases_make_no_new_one(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=[answer, other]) as runner:
        await _record(runner)
        store = DatasetStore(runner.store)
        cases = await cases_from_runs(runner, Selection(policy="answer"))
        v1 = await store.save(Dataset("qa", cases, description="six questions"))
        again = await store.save(Dataset("qa", cases, description="six questions"))
        assert (v1.version, again.version) == (1, 1)
        hand = DatasetCase("hand-1", ["where is Z9"], expected={"answer": "WHERE IS Z9"})
        v2 = await store.save(Dataset("qa", [*cases[:2], hand]))
        assert v2.version == 2

        loaded_v1 = await store.load("qa", 1)
        assert [c.id for c in loaded_v1.cases] == [c.id for c in cases]
        assert loaded_v1.cases == list(cases) and loaded_v1.description == "six questions"
        latest = await store.load("qa")
        assert (latest.version, [c.id for c in latest.cases]) == (2, ["q-0", "q-1", "hand-1"])
        assert latest.case("hand-1").source is None
        assert [(i.name, i.version, i.cases) for i in await store.list()] == [("qa", 2, 3)]
        assert [i.version for i in await store.versions("qa")] == [1, 2]
        with pytest.raises(KeyError, match="dataset 'qa' has no version 3"):
            await store.load("qa", 3)
        with pytest.raises(KeyError, match="dataset 'nope' has no any version"):
            await store.load("nope")


async def test_a_big_dataset_is_one_row_a_case(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        cases = [DatasetCase(f"c-{i:04d}", [f"q{i}"], expected=i) for i in range(1500)]
        saved = await DatasetStore(runner.store).save(Dataset("big", cases))
        loaded = await DatasetStore(runner.store).load("big", saved.version)
        assert [c.expected for c in loaded.cases] == list(range(1500))


def test_json_lines_round_trip_with_messages(tmp_path: Path) -> None:
    msg = sw.Message.user("hello")
    case = DatasetCase("m-1", kwargs={"observations": [msg]}, expected="hi", tags={"k": "v"})
    path = tmp_path / "ds.jsonl"
    Dataset("chat", [case], version=3, description="greetings").write_jsonl(path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"dataset": "chat", "version": 3, "description": "greetings"}
    back = Dataset.read_jsonl(path)
    assert (back.name, back.version, back.description) == ("chat", 0, "greetings")
    assert back.cases == [case]
    args, kwargs = back.cases[0].call()
    assert args == () and kwargs["observations"][0].text == "hello"
    renamed = Dataset.read_jsonl(path, name="chat2")
    assert renamed.name == "chat2"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("not json", "line 2: not JSON"),
        ('{"args": []}', "line 2: field 'id' is missing"),
        ('{"id": "x", "colour": 1}', "line 2: unknown field 'colour'"),
        ('{"id": "x", "status": "great"}', "line 2: case 'x': field 'status' is one of"),
        ('{"id": "x", "args": {"a": 1}}', "line 2: case 'x': field 'args' is a list"),
        ('{"id": "x", "tags": {"bad key": "v"}}', "line 2: case 'x': field 'tags'"),
        ("[1, 2]", "line 2: a case is a JSON object"),
    ],
)
def test_a_bad_line_is_refused_naming_the_file_line_and_field(
    tmp_path: Path, line: str, said: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"dataset": "d", "version": 1, "description": ""}\n' + line + "\n")
    with pytest.raises(ValueError) as err:
        Dataset.read_jsonl(path)
    assert str(path) in str(err.value) and said in str(err.value)


def test_a_tagged_value_naming_an_undeclared_type_is_data_refused_when_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text('{"id": "x", "args": [{"$t": "os.system", "v": "rm -rf /"}]}\n')
    case = Dataset.read_jsonl(path, name="odd").cases[0]
    assert case.args == [{"$t": "os.system", "v": "rm -rf /"}]  # kept as the data it is
    with pytest.raises(CorruptedRecord, match="case 'x': field 'args'"):
        case.call()


def test_names_and_duplicate_case_ids_are_refused() -> None:
    with pytest.raises(ValueError, match=r"dataset name '\.\./etc' is not"):
        Dataset("../etc", [])
    with pytest.raises(ValueError, match="case id 'a' appears twice"):
        Dataset("d", [DatasetCase("a"), DatasetCase("a")])
