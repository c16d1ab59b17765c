"""Provider-independent pieces: arguments, usage, tool specs, lazy SDK imports."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import stalwart as sw
from stalwart.core.message import Message
from stalwart.llm import ProviderStreamError, ToolSpec, Usage, tool_specs
from stalwart.llm._common import grouped
from stalwart.llm._convert_openai_chat import ChatStreamAccumulator, from_chat_completion
from stalwart.llm._tools import parse_arguments

from .conftest import payload_json, sse_events


@pytest.mark.parametrize(
    ("raw", "arguments"),
    [
        ('{"city": "Paris"}', {"city": "Paris"}),
        ("", {}),
        ("   ", {}),
        (None, {}),
        ('{"nested": {"a": [1, 2]}}', {"nested": {"a": [1, 2]}}),
    ],
)
def test_valid_arguments(raw: str | None, arguments: dict[str, object]) -> None:
    assert parse_arguments(raw) == (arguments, None)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ('{"city": "Paris"', "not valid JSON"),
        ("{'city': 'Paris'}", "not valid JSON"),
        ('{"a": 1} trailing', "not valid JSON"),
        ('["Paris"]', "must be a JSON object, not list"),
        ("null", "must be a JSON object, not null"),
        ('"Paris"', "must be a JSON object, not str"),
        ("NaN", "must be a JSON object, not float"),
    ],
)
def test_invalid_arguments_never_raise(raw: str, why: str) -> None:
    arguments, invalid = parse_arguments(raw)
    assert arguments == {}
    assert invalid is not None
    assert why in invalid
    assert invalid.endswith(raw)


def test_usage_adds_up() -> None:
    total = sum([Usage(10, 2), Usage(5, 1)], Usage())
    assert total == Usage(15, 3)
    assert total.total_tokens == 18
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]


def test_tool_spec_is_the_cores_and_comes_from_policies() -> None:
    @sw.policy
    async def ping(host: str) -> str:
        """Check that a host answers.

        Args:
            host: Host name.
        """
        return host

    assert ToolSpec is sw.ToolSpec
    spec = ToolSpec("get_time", "Local time.", {"type": "object", "properties": {}})
    (from_policy, given) = tool_specs([ping, spec])
    assert given is spec
    assert from_policy == ping.spec
    assert from_policy.name == "ping"
    assert from_policy.description == "Check that a host answers."
    assert from_policy.parameters["properties"]["host"] == {
        "type": "string",
        "description": "Host name.",
    }


def test_turns_group_calls_per_actor_and_results_together() -> None:
    a1 = Message.call("f", id="1", actor="a")
    a2 = Message.call("f", id="2", actor="a")
    b1 = Message.call("f", id="3", actor="b")
    kinds = [
        (t.kind, len(t.messages))
        for t in grouped(
            [
                Message.system("s"),
                Message.user("u"),
                Message.assistant("x", actor="a"),
                a1,
                a2,
                b1,
                Message.result(a1, 1),
                Message.result(a2, 2),
                Message.result(b1, 3),
                Message.user("again"),
            ]
        )
    ]
    assert kinds == [
        ("system", 1),
        ("user", 1),
        ("assistant", 3),
        ("assistant", 1),
        ("results", 3),
        ("user", 1),
    ]


def test_a_tool_message_without_a_result_is_refused() -> None:
    with pytest.raises(ValueError, match="action result"):
        grouped([Message("tool", "x")])


def test_chat_reply_cut_off_by_length_says_so() -> None:
    body = payload_json("openai_chat_malformed_arguments.json")
    body["choices"][0]["finish_reason"] = "length"
    (bad, _good), _ = from_chat_completion(body)
    assert bad.action_call is not None and bad.action_call.invalid is not None
    assert "cut off by the output token limit" in bad.action_call.invalid


def test_chat_stream_cut_short_raises() -> None:
    acc = ChatStreamAccumulator()
    for chunk in sse_events("openai_chat_stream_text.sse")[:-2]:
        acc.feed(chunk)
    with pytest.raises(ProviderStreamError, match="before the reply finished"):
        acc.finish()


def test_chat_stream_from_servers_that_repeat_the_call_name() -> None:
    acc = ChatStreamAccumulator()
    for piece in ('{"city"', ': "Paris"}'):
        call = {"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": piece}}
        acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    (m,), usage = acc.finish()
    assert m.action_call is not None
    assert (m.action_call.id, m.action_call.name) == ("c1", "get_weather")
    assert m.action_call.arguments == {"city": "Paris"}
    assert usage == Usage()


def test_llm_imports_without_the_sdks() -> None:
    code = (
        "import sys\n"
        "sys.modules['openai'] = None\n"
        "sys.modules['anthropic'] = None\n"
        "import stalwart.llm, stalwart.llm._convert_openai_chat, stalwart.llm._convert_anthropic\n"
        "import stalwart.llm._convert_openai_responses\n"
        "from stalwart.llm import Agent, ToolSpec, Usage\n"
        "for build, args in ((stalwart.llm.openai, ('gpt-4.1-mini',)),\n"
        "                    (stalwart.llm.anthropic, ('claude-haiku-4-5',))):\n"
        "    try:\n"
        "        build(*args, api_key='k')\n"
        "    except stalwart.llm.MissingDependency as exc:\n"
        "        print(exc)\n"
        "print(len(stalwart.llm.__all__))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    openai_line, anthropic_line, count = done.stdout.strip().splitlines()
    assert "pip install 'stalwart[openai]'" in openai_line
    assert "pip install 'stalwart[anthropic]'" in anthropic_line
    import stalwart.llm

    assert int(count) == len(stalwart.llm.__all__)


@pytest.mark.parametrize("depth", [101, 100_000])
def test_arguments_nested_too_deeply_are_refused_not_raised(depth: int) -> None:
    raw = '{"city": ' + "[" * depth + "]" * depth + "}"
    arguments, invalid = parse_arguments(raw)
    assert arguments == {}
    assert invalid is not None
    assert invalid.startswith("the arguments are nested more than 100 levels deep")
    assert len(invalid) < 3000  # the model is shown the start, not 200 KB of brackets


def test_arguments_nested_to_the_limit_are_read() -> None:
    raw = '{"city": "[[[[", "tree": ' + "[" * 99 + "]" * 99 + "}"
    arguments, invalid = parse_arguments(raw)
    assert invalid is None and arguments["city"] == "[[[["
