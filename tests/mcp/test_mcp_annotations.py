"""MCP content annotations are kept on a result's parts, and ``audience`` is
honoured: what is for the user only never reaches the model, yet is kept in
the recorded result; a served result gives the annotations back."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import mcp_types as types
import pytest

import stalwart as sw
from stalwart import mcp
from stalwart.llm._convert_openai_chat import to_chat_messages
from stalwart.testing import ScriptedLLM, call

SERVER = [sys.executable, str(Path(__file__).with_name("edge_server.py"))]
pytestmark = pytest.mark.timeout(60)


async def _chart(tmp: Path, store: str) -> tuple[list[sw.Message], list[sw.StepRecord]]:
    env = {"PATH": os.environ["PATH"], "EDGE_COUNT": str(tmp / "count")}
    model = ScriptedLLM([call("chart"), "Sales rose 12%."])

    @sw.policy
    async def report(ctx: sw.Context) -> list[sw.Message]:
        history = [sw.Message.user("How are sales?")]
        async with mcp.connect(SERVER, name="edge", env=env) as tools:
            while True:
                out = await ctx.call(model, observations=history, options=tools)
                history += out
                if not any(m.is_action_call for m in out):
                    return history

    async with sw.Runner(store) as runner:
        history = await runner.run(report, run_id="r")
        steps = await runner.steps("r")
    return history, steps


async def test_content_for_the_user_only_never_reaches_the_model(
    tmp_path: Path, sqlite_url: str
) -> None:
    history, steps = await _chart(tmp_path, sqlite_url)
    (result,) = [m for m in history if m.is_action_result]
    chart = result.action_result.value
    assert isinstance(chart, sw.Message)
    # The model's parts: the text for both, the note for the assistant; no image.
    assert [p.text for p in chart.parts if isinstance(p, sw.Text)] == [
        "Sales rose 12%.",
        "The chart is shown to the user; do not describe it.",
    ]
    assert not any(isinstance(p, sw.Media) for p in chart.parts)
    assert chart.meta["mcp"]["annotations"] == [{"part": 1, "audience": ["assistant"]}]
    (image,) = chart.meta["mcp"]["for_user"]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert image["annotations"] == {"audience": ["user"], "priority": 0.5}

    # What a provider sends the model: no image anywhere in the request.
    wire = str(to_chat_messages(history))
    assert "image" not in wire and "Sales rose 12%." in wire

    # The recorded result of the tool's step keeps the image for the user.
    (step,) = [s for s in steps if s.name == "chart"]
    assert step.output is not None
    assert '"audience":["user"],"priority":0.5' in step.output.replace(" ", "")


def test_a_served_result_gives_the_annotations_back() -> None:
    png = base64.b64encode(b"\x89PNG chart").decode()
    original = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Sales rose 12%."),
            types.ImageContent(
                type="image",
                data=png,
                mime_type="image/png",
                annotations=types.Annotations(audience=["user"], priority=0.5),
            ),
            types.TextContent(
                type="text", text="note", annotations=types.Annotations(audience=["assistant"])
            ),
        ]
    )
    served = mcp.result_of(mcp.message_of(original, "edge"), "chart")
    assert [b.model_dump(exclude_none=True) for b in served.content] == [
        original.content[0].model_dump(exclude_none=True),
        original.content[2].model_dump(exclude_none=True),
        original.content[1].model_dump(exclude_none=True),
    ]


def test_a_result_all_for_the_user_tells_the_model_so() -> None:
    only = types.CallToolResult(
        content=[
            types.ImageContent(
                type="image",
                data="AAAA",
                mime_type="image/png",
                annotations=types.Annotations(audience=["user"]),
            )
        ]
    )
    message = mcp.message_of(only, "edge")
    assert message.text == "(The tool's result, image/png, was shown to the user only.)"
    assert not any(isinstance(p, sw.Media) for p in message.parts)
