"""A served run that waits for a person asks the MCP client, by elicitation.

When a tool's run waits for a signal (``ctx.ask``, ``ctx.wait_for`` with a
prompt) and the client said it takes elicitation, the server asks the
client's user what the run asks, and sends the answer as the signal: the run
goes on and the call is answered with its outcome. How it asks follows the
protocol the client speaks:

- up to 2025-11-25, an ``elicitation/create`` request during the call;
- from 2026-07-28, an ``input_required`` result holding the question; the
  client asks its user and sends the call again with the answer, which is
  the same request, so the same run (its idempotency key).

The question is one text field, ``answer``, described by what the run asks;
the answer is read as JSON when it is JSON (``true``, ``120``,
``{"ok": true}``), else as the text it is. A declined or cancelled question
sends nothing: the call is answered with what the run waits for, as for a
client without elicitation, and whoever else may answer it can.

An answer is sent only to the wait it answers: its key names the signal and
the recorded question (the ``stalwart.ask`` step), so an answer replayed by
a client after the run moved on is not taken for a later question.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

import stalwart as sw
from stalwart.core.ledger import ASKED, StepRecord

__all__ = ["ASK_WINDOW", "Question", "answer_given", "ask_client", "latest_question"]

#: The latest steps of a waiting run read for what it asks (whole records:
#: never the run's every step).
ASK_WINDOW = 50

_KEY = "stalwart/ask"
_MODERN = "2026-07-28"


@dataclass(frozen=True, slots=True)
class Question:
    """What a waiting run asks: the signal it waits for, and the recorded
    question (``key`` is its ``stalwart.ask`` step's; empty when none was)."""

    run_id: str
    signal: str
    key: str = ""
    prompt: str | None = None
    about: Any = None

    @property
    def input_key(self) -> str:
        """The key of the question in an ``input_required`` result."""
        return f"{_KEY}:{self.run_id}:{self.signal}:{self.key}"

    def form(self) -> tuple[str, dict[str, Any]]:
        """The message and the requested schema of the elicitation."""
        message = self.prompt or f"The run {self.run_id!r} waits for {self.signal!r}."
        description = "Your answer (JSON, or text)."
        if self.about is not None:
            details = sw.Message.result("mcp", self.about, name=self.signal).text
            description = f"About: {details}. " + description
        schema = {
            "type": "object",
            "properties": {
                "answer": {"type": "string", "title": "Answer", "description": description}
            },
            "required": ["answer"],
        }
        return message, schema


def latest_question(run_id: str, signal: str, steps: list[StepRecord]) -> Question:
    """What the latest wait for ``signal`` asks (``ctx.ask``, ``wait_for(prompt=, about=)``)."""
    found = Question(run_id, signal)
    latest = (-1.0, "")
    for step in steps:
        if step.name != f"stalwart.{ASKED}" or step.output is None or step.error is not None:
            continue
        try:
            value = json.loads(step.output)  # shown as recorded, as `runs waiting` does
        except (ValueError, RecursionError):  # unreadable: the wait is still answered
            continue
        if not isinstance(value, Mapping) or value.get("signal") != signal:
            continue
        if (step.finished_at, step.key) >= latest:
            latest = (step.finished_at, step.key)
            prompt = value.get("prompt")
            found = Question(
                run_id,
                signal,
                step.key,
                prompt if isinstance(prompt, str) else None,
                value.get("about"),
            )
    return found


def _takes_elicitation(ctx: ServerRequestContext[Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


def _modern(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client speaks a protocol that asks by ``input_required``."""
    return (ctx.protocol_version or "") >= _MODERN


async def ask_client(
    ctx: ServerRequestContext[Any], runner: sw.Runner, question: Question
) -> types.InputRequiredResult | bool:
    """Ask the client's user ``question``: the ``input_required`` result to
    answer the call with (2026-07-28 on), or whether an answer was sent as
    the signal (before); False when the client takes no elicitation or its
    user gave no answer."""
    if not _takes_elicitation(ctx):
        return False
    message, schema = question.form()
    if _modern(ctx):
        params = types.ElicitRequestFormParams(message=message, requested_schema=schema)
        request = types.ElicitRequest(params=params)
        return types.InputRequiredResult(input_requests={question.input_key: request})
    try:
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except MCPError:
        return False
    return await _send(runner, question, result)


async def answer_given(
    runner: sw.Runner, params: types.CallToolRequestParams, waiting: Question | None
) -> bool:
    """Send the answer a call sent again carries (``input_responses``) for
    the question its run waits on now; whether one was sent."""
    responses = params.input_responses or {}
    if waiting is None or not responses:
        return False
    result = responses.get(waiting.input_key)
    if not isinstance(result, types.ElicitResult):
        return False
    return await _send(runner, waiting, result)


async def _send(runner: sw.Runner, question: Question, result: types.ElicitResult) -> bool:
    if result.action != "accept" or not isinstance(result.content, Mapping):
        return False
    answer = result.content.get("answer")
    if not isinstance(answer, str):
        return False
    try:
        payload: Any = json.loads(answer)
    except ValueError:
        payload = answer
    await runner.signal(question.run_id, question.signal, payload)
    return True
