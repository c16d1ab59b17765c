"""A long value's preview is the beginning of its whole layout, and the
count of what is left out is exact, without laying the whole value out."""

from __future__ import annotations

import json

import pytest

from stalwart.web.values import pretty, shown

TREES = [
    {"a": [], "b": {}, "c": [1, 2.5, None, True], "d": {"e": [{"f": "é ✓ \\n \\u2028"}]}},
    [[[[]]], [{}], [[1]], "x" * 50],
    {
        "conversation": [
            {"role": "user", "parts": [{"type": "text", "text": f"m{i}"}]} for i in range(300)
        ]
    },
    "just a string",
    12345,
]


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("limit", [1, 10, 200, 4000, 10**6])
def test_a_preview_is_the_start_of_the_layout_and_counts_the_rest(tree: object, limit: int) -> None:
    text = json.dumps(tree)
    whole = pretty(text)
    preview = shown(text, "/whole", limit)
    assert preview.text == whole[:limit]
    assert preview.more == max(len(whole) - limit, 0)
    assert preview.href == ("/whole" if len(whole) > limit else "")


def test_text_that_is_not_json_is_cut_as_it_is() -> None:
    preview = shown("not {json", "/whole", 4)
    assert (preview.text, preview.more) == ("not ", 5)
