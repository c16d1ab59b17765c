"""Where a run resumed and which steps were replayed, from the ledger's
records alone: a caller that started after its own call's record ran again
after a resume; a run held on a later claim resumed when claimed; nothing
is marked that the records do not prove."""

from __future__ import annotations

from stalwart.core.ledger import RunRecord, StepRecord
from stalwart.web.replay import replayed, resumes
from stalwart.web.timeline import timeline


def step(key: str, started: float, finished: float, name: str = "p") -> StepRecord:
    return StepRecord(key, name, "h", "{}", "1", None, 1, started, finished)


def run(status: str = "succeeded", fence: int = 1, updated: float = 100.0) -> RunRecord:
    return RunRecord("r", "root", "{}", status, created_at=0.0, updated_at=updated, fence=fence)  # type: ignore[arg-type]


def by_key(*steps: StepRecord) -> dict[str, StepRecord]:
    return {s.key: s for s in steps}


def test_a_caller_that_started_after_its_call_was_recorded_marks_a_resume() -> None:
    # 1 ran once; 2 was executing when its process died: its call 2.1 had
    # been recorded at 3.0, and 2 ran again from 50.0, calling 2.2 for real.
    steps = by_key(
        step("1", 1.0, 2.0),
        step("2.1", 2.5, 3.0),
        step("2", 50.0, 60.0, "batch"),
        step("2.2", 51.0, 59.0),
    )
    points = resumes(run(), steps)
    assert [(p.at, p.cause) for p in points] == [(50.0, "caller")]
    assert "step 2 batch ran again: its call 2.1 was recorded before it started" in points[0].why
    marked = {k for k, s in steps.items() if replayed(s, points) is not None}
    assert marked == {"1", "2.1"}


def test_one_execution_marks_nothing() -> None:
    steps = by_key(
        step("1", 1.0, 2.0), step("2", 2.0, 9.0), step("2.1", 3.0, 4.0), step("2.2", 4.0, 8.0)
    )
    assert resumes(run(), steps) == []


def test_an_option_call_of_a_reply_is_not_a_call_inside_it() -> None:
    # A tool call (1#1) runs after the model's step finished: no resume.
    steps = by_key(step("1", 1.0, 2.0), step("1#1", 2.1, 3.0), step("1#1.1", 2.2, 2.9))
    assert resumes(run(), steps) == []


def test_nested_callers_that_ran_again_are_one_resume_at_the_outer_start() -> None:
    steps = by_key(
        step("1.1.1", 1.0, 2.0),
        step("1", 40.0, 49.0),
        step("1.1", 41.0, 48.0),
        step("1.1.2", 42.0, 47.0),
    )
    assert [p.at for p in resumes(run(), steps)] == [40.0]


def test_a_run_held_on_a_later_claim_resumed_when_it_was_claimed() -> None:
    steps = by_key(step("1", 1.0, 2.0), step("2", 30.0, 31.0))
    held = resumes(run("running", fence=2, updated=20.0), steps)
    assert [(p.at, p.cause) for p in held] == [(20.0, "claim")]
    assert {k for k, s in steps.items() if replayed(s, held)} == {"1"}
    assert resumes(run("running", fence=1, updated=20.0), steps) == []  # its first claim
    assert resumes(run("succeeded", fence=2, updated=40.0), steps) == []  # the time is gone


def test_the_timeline_draws_replayed_steps_and_the_resume() -> None:
    steps = by_key(step("1", 1.0, 2.0), step("2.1", 2.5, 3.0), step("2", 50.0, 60.0, "batch"))
    drawn = timeline(run(updated=60.0), steps, now=60.0)
    assert drawn is not None
    bars = {b.key: b for b in drawn.bars}
    assert bars["1"].replayed and bars["2.1"].replayed and not bars["2"].replayed
    assert "replayed after the resume at +50.00 s" in bars["1"].title
    (mark,) = drawn.resumes
    assert abs(mark.left - 833.33) < 0.01  # 50 s of a 60 s axis
    assert mark.title.startswith("resumed at +50.00 s: step 2 batch ran again")
