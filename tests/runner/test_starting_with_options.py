"""A run started with ``options=`` (``runner.run(model, observations=...,
options=[...])``): the root is an options dispatch, as ``ctx.call(model,
observations=..., options=[...])`` is a step's, on every store.

A run's inputs are recorded bound to the policy's parameters; ``options``
stays a keyword there even when the policy takes it positionally (a model's
``__call__(ctx, observations, options=())``), or the run, read back from a
durable store, would call the model with it positionally, and nothing would
run the action calls the model returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.errors import SerializationError
from stalwart.runner.inputs import read_inputs, run_inputs
from stalwart.testing.scripted import ScriptedLLM, call

GO = [sw.Message.user("go")]


@sw.policy
async def search(query: str) -> str:
    return f"found {query}"


@sw.policy
async def toned(
    ctx: sw.Context, observations: list[sw.Message], options: Sequence[Any] = (), tone: str = ""
) -> list[sw.Message]:
    """A model whose ``options`` and the parameter after it are positional-or-keyword."""
    return [call("search", query=f"{tone} {len(observations)}")]


def _results(out: list[sw.Message]) -> list[Any]:
    return [m.action_result.value for m in out if m.action_result is not None]


async def test_a_root_offered_options_runs_the_action_calls_its_model_returns(
    any_store_url: str,
) -> None:
    model = ScriptedLLM([[call("search", query="durable agents")]])
    async with sw.Runner(any_store_url, policies=[search]) as runner:
        out = await runner.run(model, observations=GO, options=["search"])
    assert _results(out) == ["found durable agents"]


async def test_the_parameters_after_options_reach_the_root_as_given(any_store_url: str) -> None:
    async with sw.Runner(any_store_url, policies=[search]) as runner:
        out = await runner.run(toned, observations=GO, options=["search"], tone="calm")
    assert _results(out) == ["found calm 1"]


def test_options_are_recorded_as_a_keyword_whatever_the_parameter_kind() -> None:
    recorded = run_inputs(toned, "r", (), {"observations": [], "options": ["search"], "tone": "x"})
    assert read_inputs("r", recorded) == {
        "args": [[]],
        "kwargs": {"options": ["search"], "tone": "x"},
    }
    # Given positionally, they are the model's argument, not an offer: as they were.
    recorded = run_inputs(toned, "r", ([], ["search"]), {})
    assert read_inputs("r", recorded) == {"args": [[], ["search"]], "kwargs": {}}


async def test_an_enqueued_run_offered_options_is_recorded_with_them_as_a_keyword(
    store_url: str,
) -> None:
    async with sw.Runner(store_url) as runner:
        handle = await runner.enqueue(toned, GO, options=["search"])
        rec = await runner.get_run(handle.run_id)
    assert rec is not None
    assert read_inputs(rec.id, rec.inputs)["kwargs"] == {"options": ["search"]}


async def test_policies_offered_to_a_durable_run_are_refused_naming_the_run_and_the_option(
    store_url: str,
) -> None:
    """A run's inputs hold options by name; the policy itself cannot be
    recorded. The error says so, and what to pass instead."""
    model = ScriptedLLM([[call("search", query="x")]])
    async with sw.Runner(store_url) as runner:
        with pytest.raises(SerializationError) as caught:
            await runner.run(model, observations=GO, options=[search], run_id="offer")
    text = str(caught.value)
    assert "run 'offer'" in text and "options[0]" in text and "'search'" in text
    assert "options=['search']" in text and "policies=" in text


async def test_policies_offered_to_a_run_in_memory_run_as_before() -> None:
    model = ScriptedLLM([[call("search", query="x")]])
    async with sw.Runner() as runner:
        out = await runner.run(model, observations=GO, options=[search])
    assert _results(out) == ["found x"]
