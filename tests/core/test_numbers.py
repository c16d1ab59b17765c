"""Policy arguments are read leniently ("6" is 6 for an int), but a boolean is never a number."""

from __future__ import annotations

import pydantic
import pytest

import stalwart as sw


class Limits(pydantic.BaseModel):
    most: int


@sw.policy
async def book(
    seats: int,
    price: float = 0.0,
    urgent: bool = False,
    rows: list[int] | None = None,
    limits: Limits | None = None,
    flag: int | bool = 0,
) -> str:
    return "booked"


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"seats": True}, "seats: Input should be a number, not a boolean"),
        ({"seats": 1, "price": False}, "price: Input should be a number, not a boolean"),
        ({"seats": 1, "rows": [1, True]}, "rows: Input should be a number, not a boolean (at 1)"),
        ({"seats": 1, "limits": {"most": True}}, "(at most)"),
    ],
)
def test_a_boolean_is_not_a_number(arguments: dict[str, object], said: str) -> None:
    with pytest.raises(sw.ArgumentError, match=r"invalid arguments for 'book'") as caught:
        book.validate(arguments)
    assert said in str(caught.value)


def test_numbers_are_read_leniently_and_booleans_kept_where_wanted() -> None:
    got = book.validate({"seats": "6", "price": "9.5", "urgent": True, "rows": ["2"], "flag": True})
    assert got["seats"] == 6 and got["price"] == 9.5 and got["rows"] == [2]
    assert got["urgent"] is True and got["flag"] is True
