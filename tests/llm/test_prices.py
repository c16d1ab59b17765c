"""Price tables: what a model call cost, and tables refused where they are wrong."""

from __future__ import annotations

import math

import pytest

from stalwart import llm


def test_cost_is_tokens_times_the_price_per_million() -> None:
    price = llm.Price(input=0.4, output=1.6)
    assert price.cost(llm.Usage(1_000_000, 0)) == pytest.approx(0.4)
    assert price.cost(llm.Usage(2000, 500)) == pytest.approx((2000 * 0.4 + 500 * 1.6) / 1e6)
    assert price.cost(llm.Usage()) == 0


def test_a_table_is_read_from_its_json_form() -> None:
    table = llm.read_prices(
        {"gpt-4.1-mini": {"input": 0.4, "output": 1.6}, "free": {"input": 0, "output": 0}}
    )
    assert table == {"gpt-4.1-mini": llm.Price(0.4, 1.6), "free": llm.Price(0, 0)}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], r"prices: expected an object of model name"),
        ({"m": 3}, r"prices\['m'\]: expected \{'input': N, 'output': N\}.*got int"),
        ({"m": {"input": 1}}, r"prices\['m'\]: expected .*got \['input'\]"),
        (
            {"m": {"input": 1, "output": 2, "x": 3}},
            r"prices\['m'\]: .*got \['input', 'output', 'x'\]",
        ),
        (
            {"m": {"input": -1, "output": 2}},
            r"prices\['m'\]: Price\.input: expected a finite number >= 0",
        ),
        ({"m": {"input": 1, "output": "2"}}, r"prices\['m'\]: Price\.output: .*got '2'"),
        ({"m": {"input": True, "output": 2}}, r"Price\.input: .*got True"),
        ({"m": {"input": math.inf, "output": 2}}, r"Price\.input: .*got inf"),
        ({"m": {"input": math.nan, "output": 2}}, r"Price\.input: .*got nan"),
    ],
)
def test_a_wrong_table_names_the_model_and_field(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        llm.read_prices(data)
