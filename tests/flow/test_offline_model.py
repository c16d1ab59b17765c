"""The offline model the cookbook test points programs at answers the
official SDKs deterministically, counts their calls and holds one on demand."""

from __future__ import annotations

import threading

import pytest

from .offline_model import answer, offline_model

# The official SDKs come with the openai and anthropic extras (a leg of CI
# installs only postgres and dev).
anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

FORMAT = "Reply in this format:\n```yaml\naction: search\nreason: why\n```\nNothing else."


def test_a_prompt_showing_a_format_block_gets_that_block_back() -> None:
    assert answer(FORMAT) == "```yaml\naction: search\nreason: why\n```"
    assert answer('Say it as ```json\n{"a": 1}\n``` please') == '```json\n{"a": 1}\n```'


def test_any_other_prompt_gets_a_line_that_depends_on_it_alone() -> None:
    assert answer("hello") == answer("hello")
    assert answer("hello") != answer("hello!")


def test_both_sdks_reach_it_and_each_call_is_counted() -> None:
    with offline_model() as model:
        env = model.env
        chat = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key="offline")
        reply = chat.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": FORMAT}]
        )
        assert reply.choices[0].message.content == answer(FORMAT)

        claude = anthropic.Anthropic(base_url=env["ANTHROPIC_BASE_URL"], api_key="offline")
        message = claude.messages.create(
            model="claude", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
        assert message.content[0].type == "text"
        assert message.content[0].text == answer("hi")

        thought = claude.messages.create(
            model="claude",
            max_tokens=2000,
            thinking={"type": "enabled", "budget_tokens": 1024},
            messages=[{"role": "user", "content": "hi"}],
        )
        assert [block.type for block in thought.content] == ["thinking", "text"]
        assert thought.content[1].type == "text"
        assert thought.content[1].text == answer("hi")
        assert model.requests == 3


def test_a_held_call_is_answered_only_when_released() -> None:
    with offline_model() as model:
        chat = openai.OpenAI(base_url=model.env["OPENAI_BASE_URL"], api_key="offline")
        model.hold(1)
        replies: list[str | None] = []

        def ask() -> None:
            reply = chat.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
            replies.append(reply.choices[0].message.content)

        caller = threading.Thread(target=ask)
        caller.start()
        assert model.arrived.wait(timeout=30)
        assert replies == [] and model.requests == 1
        model.release()
        caller.join(timeout=30)
        assert replies == [answer("hi")]
