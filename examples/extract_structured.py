"""Structured output: a model turns a free-form email into a validated pydantic object.

The agent is told the JSON schema of ``Meeting``; its answer is parsed and
validated, and when it does not validate the error goes back to the model,
which corrects itself (up to two repairs). What comes out is a ``Meeting``
instance, not text. It runs with OPENAI_API_KEY or ANTHROPIC_API_KEY set
(without one it says how to set one):

    export ANTHROPIC_API_KEY=sk-ant-...
    python examples/extract_structured.py
    python examples/extract_structured.py --file email.txt --model openai:gpt-4.1-mini
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from stalwart import llm

EMAIL = """\
From: Ana Souza <ana@example.com>
Subject: Launch review moved

Hi all, the launch review moves to Thursday 12 March 2026 at 14:30 (Lisbon time),
room Tejo. Ana Souza (PM) runs it; Ben Okafor (engineering) and Chloe Martin
(design) present. Before then Ben sends the load test results, and Chloe
updates the onboarding screens. Bring your questions!"""


class Person(BaseModel):
    name: str
    role: str | None = Field(None, description="Their role or team, if the text says.")


class Meeting(BaseModel):
    """A meeting, as an email announces it."""

    title: str
    date: str = Field(description="ISO 8601 date, e.g. 2026-03-12")
    time: str | None = Field(None, description="24-hour local time, e.g. 14:30")
    location: str | None = None
    attendees: list[Person]
    action_items: list[str] = Field(description="What someone must do, one sentence each.")


INSTRUCTIONS = "Extract the meeting the email describes. Use only what the email says."

NO_KEY = """\
This example calls a real model, and no API key is set. Set one of:

    export OPENAI_API_KEY=sk-...         # uses openai:gpt-4.1-mini
    export ANTHROPIC_API_KEY=sk-ant-...  # uses anthropic:claude-haiku-4-5

then run it again (or pick a model with --model provider:model)."""


def build_agent(model: Any) -> llm.Agent:
    """An extractor on ``model`` whose answers must validate as a :class:`Meeting`."""
    return llm.Agent(
        model, instructions=INSTRUCTIONS, output_type=Meeting, max_repairs=2, name="extractor"
    )


async def extract(model: Any, text: str) -> Meeting:
    """The meeting ``text`` describes, validated."""
    meeting: Meeting = await build_agent(model).run(text)
    return meeting


def model_from_env(choice: str | None = None) -> Any | None:
    """The model to use: ``choice``, else one whose API key is set, else None."""
    if choice:
        return llm.model(choice)
    if os.environ.get("OPENAI_API_KEY"):
        return llm.openai("gpt-4.1-mini")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return llm.anthropic("claude-haiku-4-5")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Extract a meeting from an email.")
    parser.add_argument("--file", type=Path, help="the email (default: a sample)")
    parser.add_argument("--model", help="provider:model, e.g. anthropic:claude-haiku-4-5")
    args = parser.parse_args(argv)
    try:
        model = model_from_env(args.model)
    except llm.MissingAPIKey as exc:
        print(f"{exc}\n\n{NO_KEY}")
        return 0
    if model is None:
        print(NO_KEY)
        return 0
    text = args.file.read_text() if args.file else EMAIL
    meeting = asyncio.run(extract(model, text))
    print(meeting.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
