"""A conversation drawn from model calls whose arguments repeat the last
one's messages: a message rewritten in place (a compacted history) is
shown again as the new message it is, and one repeated is shown once."""

from __future__ import annotations

import json
from typing import Any

from stalwart.core.ledger import StepRecord
from stalwart.web.conversation import bubbles


def _msg(role: str, text: str) -> dict[str, Any]:
    return {
        "$t": "msg",
        "v": {"role": role, "actor": role, "parts": [{"type": "text", "text": text}]},
    }


def _model_call(key: str, at: float, history: list[dict[str, Any]], reply: str) -> StepRecord:
    args = json.dumps({"observations": history})
    return StepRecord(
        key, "model", "h", args, json.dumps([_msg("assistant", reply)]), None, 1, at, at + 0.5
    )


def test_a_message_rewritten_in_place_is_shown_again_and_a_repeated_one_once() -> None:
    first = [_msg("system", "Be brief."), _msg("user", "a long question")]
    second = [*first, _msg("assistant", "one"), _msg("user", "and then?")]
    third = [
        first[0],
        _msg("user", "a summary of the question"),
        *second[2:],
        _msg("assistant", "two"),
    ]
    steps = {
        "1": _model_call("1", 1.0, first, "one"),
        "2": _model_call("2", 2.0, second, "two"),
        "3": _model_call("3", 3.0, third, "three"),
    }
    texts = [b.texts[0].text for b in bubbles(steps)]
    assert texts == [
        "Be brief.",
        "a long question",
        "one",
        "and then?",
        "two",
        "a summary of the question",
        "three",
    ]
