"""Journeys: steps with their own prompt and tools, a typed state, durable.

Every journey here runs as a durable run on a real SQLite file, its model a
``ScriptedLLM`` whose replies are functions that note what each model call
was shown (the system prompt, the tools offered), so the tests see exactly
what a real model would have been sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import subprocess
import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import stalwart as sw
from stalwart.core.ledger import StepRecord
from stalwart.core.message import Message
from stalwart.core.policy import as_policy
from stalwart.journey import OUT_OF_ROUNDS, Journey, JourneyReply, Step, ToolContext
from stalwart.testing import ScriptedLLM, call

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_journey.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("examples_support_journey", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Seen:
    """What each model call was shown: its system prompt and the tools offered."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.tools: list[list[str]] = []

    def reply(self, message: Message | str, tokens: tuple[int, int] = (10, 1)) -> Any:
        def answer(observations: list[Message], options: Sequence[Any]) -> Message:
            self.prompts.append(observations[0].text)
            self.tools.append([as_policy(o).name for o in options])
            m = Message.assistant(message) if isinstance(message, str) else message
            usage = {"input_tokens": tokens[0], "output_tokens": tokens[1]}
            return dataclasses.replace(m, meta={"usage": usage})

        return answer


async def run_journey(
    tmp_path: Path, journey: Journey[Any, Any], messages: list[str], run_id: str = "j"
) -> tuple[JourneyReply, list[StepRecord]]:
    example = load_example()
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    async with sw.Runner(url, policies=[journey], poll_interval=0.02) as runner:
        handle = await runner.start(journey, message=messages[0], run_id=run_id)
        for n, text in enumerate(messages[1:], 1):
            await asyncio.wait_for(example.waiting_reply(runner, run_id, n), 30)
            await runner.signal(run_id, "message", text)
        reply = await handle.result(timeout=30)
        return reply, await runner.steps(run_id)


def support(model: Any, max_rounds: int = 6) -> Journey[Any, Any]:
    example = load_example()
    journey: Journey[Any, Any] = example.support_journey(model)
    if max_rounds != journey.max_rounds:
        journey = Journey(
            model,
            steps=example.STEPS,
            state=example.Ticket,
            start=example.Stage.IDENTIFY,
            name="support",
            max_rounds=max_rounds,
        )
    return journey


async def test_a_step_change_mid_turn_refreshes_the_prompt_and_tools_of_the_next_call(
    tmp_path: Path,
) -> None:
    seen = Seen()
    script = [
        seen.reply(call("identify", email="ada@example.com")),
        seen.reply(call("line_test", email="ada@example.com")),
        seen.reply(call("diagnose", problem="old firmware")),
        seen.reply("Shall I update your router?"),
        seen.reply(call("push_firmware", version="1.0.7")),
        seen.reply("Is it stable now?"),
        seen.reply(call("close_ticket", resolved=True)),
        seen.reply("Closed."),
    ]
    journey = support(ScriptedLLM(script))
    reply, steps = await run_journey(tmp_path, journey, ["hi, ada@example.com", "yes", "yes"])

    # The first message went through three steps: IDENTIFY, then DIAGNOSE from
    # the very next model call (its prompt rendered from the new state, its
    # tools offered), then RESOLVE.
    assert seen.tools[:4] == [
        ["identify"],
        ["line_test", "diagnose"],
        ["line_test", "diagnose"],
        ["push_firmware"],
    ]
    assert "find out who they are" in seen.prompts[0]
    assert "The customer is ada@example.com." in seen.prompts[1]
    assert "The problem: old firmware." in seen.prompts[3]
    confirm = ["close_ticket"]
    assert seen.tools[4:] == [["push_firmware"], confirm, confirm, confirm]
    assert "Done: router firmware updated to 1.0.7." in seen.prompts[5]

    # Four steps visited, ended by the last tool; the state is typed.
    assert reply.done and reply.step == "CONFIRM" and reply.text == "Closed."
    ticket = journey.state_of(reply)
    assert ticket.resolved and ticket.customer == "ada@example.com"
    assert ticket.fix == "router firmware updated to 1.0.7"

    # Each change is a recorded step whose output is the step and the state.
    changes = [json.loads(s.output or "") for s in steps if s.name == "stalwart.journey"]
    assert [(c["step"], c["done"]) for c in changes] == [
        ("DIAGNOSE", False),
        ("RESOLVE", False),
        ("CONFIRM", False),
        ("CONFIRM", True),
    ]
    assert changes[1]["state"]["problem"] == "old firmware"


async def test_token_usage_counts_every_model_call_of_a_message(tmp_path: Path) -> None:
    seen = Seen()
    script = [
        seen.reply(call("identify", email="ada@example.com"), (100, 5)),
        seen.reply(call("line_test", email="ada@example.com"), (200, 6)),
        seen.reply("What happens exactly?", (300, 7)),
        seen.reply(call("diagnose", problem="drops"), (400, 8)),
        seen.reply(call("push_firmware", version="2"), (500, 9)),
        seen.reply(call("close_ticket", resolved=True), (600, 10)),
        seen.reply("Bye.", (700, 11)),
    ]
    journey = support(ScriptedLLM(script))
    reply, _ = await run_journey(tmp_path, journey, ["hi", "it drops"])
    assert reply.usage == {"input_tokens": 400 + 500 + 600 + 700, "output_tokens": 38}
    assert reply.total_usage == {"input_tokens": 2800, "output_tokens": 56}


async def test_at_the_turn_limit_the_user_gets_a_reply_not_a_tool_output(sqlite_url: str) -> None:
    seen = Seen()
    script = [
        seen.reply(call("identify", email="ada@example.com")),
        seen.reply(call("line_test", email="ada@example.com")),
        seen.reply("I tested your line; it looks stable. I need a moment more to find the cause."),
    ]
    journey = support(ScriptedLLM(script), max_rounds=2)
    url = sqlite_url
    async with sw.Runner(url, policies=[journey], poll_interval=0.02) as runner:
        await runner.start(journey, message="hi", run_id="limit")
        text = await asyncio.wait_for(load_example().waiting_reply(runner, "limit", 1), 30)
        steps = await runner.steps("limit")
    assert text.startswith("I tested your line")
    # The third call was offered no tool and told to answer in words.
    assert seen.tools[2] == []
    model_calls = [s for s in steps if s.name == "scripted_llm"]
    assert len(model_calls) == 3
    assert "options" not in json.loads(model_calls[2].args or "{}")
    assert OUT_OF_ROUNDS in (model_calls[2].args or "")


async def test_a_model_that_still_calls_a_tool_at_the_limit_gets_words_to_the_user(
    sqlite_url: str,
) -> None:
    script = [call("line_test", email="a@b.c"), call("line_test", email="a@b.c")]
    journey = support(ScriptedLLM(script), max_rounds=1)
    async with sw.Runner(sqlite_url, policies=[journey]) as runner:
        await runner.start(journey, message="hi", run_id="r")
        text = await asyncio.wait_for(load_example().waiting_reply(runner, "r", 1), 30)
    assert "could not finish" in text
    assert "router_firmware" not in text


class Door(Enum):
    OPEN = 1
    CLOSED = 2
    LOCKED = 3


class Lock(BaseModel):
    turns: int = 0


async def lock(ctx: ToolContext) -> str:
    """Lock the door."""
    ctx.goto(Door.LOCKED)
    return "locked"


async def close(ctx: ToolContext) -> str:
    """Close the door."""
    ctx.state.turns = "many"  # not an int: the tool's error, not the run's
    return "closed"


async def test_a_move_not_allowed_or_a_bad_state_is_an_error_the_model_reads(
    sqlite_url: str,
) -> None:
    def check(observations: list[Message], options: Sequence[Any]) -> str:
        results = [m.action_result for m in observations if m.action_result is not None]
        assert [r.error_type for r in results] == ["ValueError", "ValidationError"]
        assert results[0].error_message is not None
        assert "cannot move from OPEN to LOCKED" in results[0].error_message
        return "I cannot lock an open door."

    journey: Journey[Door, Lock] = Journey(
        ScriptedLLM([[call("lock"), call("close")], check]),
        steps={
            Door.OPEN: Step("The door is open.", tools=[lock, close], moves=[Door.CLOSED]),
            Door.CLOSED: Step("Closed.", tools=[lock]),
            Door.LOCKED: Step("Locked."),
        },
        state=Lock,
        start=Door.OPEN,
        name="door",
    )
    async with sw.Runner(sqlite_url, policies=[journey]) as runner:
        await runner.start(journey, message="lock it", run_id="d")
        text = await asyncio.wait_for(load_example().waiting_reply(runner, "d", 1), 30)
        steps = await runner.steps("d")
    assert text == "I cannot lock an open door."
    assert not [s for s in steps if s.name == "stalwart.journey"]  # nothing changed


def test_instructions_that_name_no_field_of_the_state_fail_at_definition() -> None:
    with pytest.raises(ValueError, match=r"step OPEN: the instructions name \{colour\}"):
        Journey(
            ScriptedLLM([]),
            steps={d: Step("The {colour} door.") for d in Door},
            state=Lock,
            start=Door.OPEN,
        )
    with pytest.raises(ValueError, match="steps without a Step: LOCKED"):
        Journey(
            ScriptedLLM([]),
            steps={Door.OPEN: Step("x"), Door.CLOSED: Step("y")},
            state=Lock,
            start=Door.OPEN,
        )


def test_the_support_journey_example_runs_offline() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "support:  Glad to hear it. Your ticket is closed; have a good day!" in out
    assert "'resolved': True" in out
    assert out.count('"step":"CONFIRM"') == 2
