"""An option that answers with a message: the model reads its parts, media included.

MCP tools answer with text and images; a tool may return a chart. Before,
the result message carried the value only, and the providers, which read
text and media from the result message's parts, never showed the image to
the model.
"""

from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import Message
from stalwart.core.message import Media, Text
from stalwart.llm._common import result_content
from stalwart.testing import call

PNG = b"\x89PNG\r\n\x1a\n-a-chart-"


@sw.policy
async def chart(title: str) -> Message:
    """Draw a chart."""
    return Message.user(f"chart: {title}", Media("image/png", data=PNG))


@sw.policy(name="model")
async def model(observations: list[Message], options: Sequence[Any] = ()) -> list[Message]:
    return [call("chart", title="sales")]


@sw.policy
async def agent(ctx: sw.Context) -> list[Message]:
    return await ctx.call(model, observations=[Message.user("go")], options=[chart])


def _check(messages: list[Message]) -> None:
    result = messages[-1]
    assert result.is_action_result
    text, media = result_content(result)
    assert text == "chart: sales"
    assert [m.data for m in media] == [PNG], "the image must reach the model"
    assert any(isinstance(p, Text) for p in result.parts)


async def test_a_message_result_keeps_its_text_and_media_for_the_model() -> None:
    _check(await sw.Runner().run(agent))


async def test_and_on_replay_from_the_ledger(sqlite_url: str) -> None:
    url = sqlite_url
    async with sw.Runner(url) as runner:
        first = await runner.run(agent, run_id="m")
    _check(first)
    async with sw.Runner(url, policies=[agent]) as runner:
        again = await sw.RunHandle(runner, "m").result()
    _check(again)
