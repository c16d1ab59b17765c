"""What a run records as its inputs (``run_inputs``), on the path every
``enqueue`` and ``enqueue_many`` takes.

Run ids are idempotent by their recorded inputs (S13), and a stored run is
compared with a new call by that text first: the fast path (plain scalars
written directly, the binding planned once per call shape) must write
exactly the text the codec writes for the bound arguments, for every shape
of call, and still refuse what cannot be recorded, naming the run and the
argument.
"""

from __future__ import annotations

import inspect
import itertools
import math
from typing import Any

import pytest

import stalwart as sw
from stalwart.core import codec
from stalwart.core.errors import SerializationError
from stalwart.runner.inputs import run_inputs


@sw.policy
async def wide(x: int, y: str = "d", *rest: Any, z: float = 1.0, **kw: Any) -> None:
    """Positional-or-keyword, defaults, *args, keyword-only and **kwargs."""


@sw.policy
async def strict(x: int, /, y: int, *, z: int) -> None:
    """Positional-only and keyword-only."""


@sw.policy
async def with_ctx(ctx: sw.Context, q: str, n: int = 3) -> None:
    """The injected context is no argument of the call."""


def _codec_text(pol: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The inputs as the codec writes the arguments bound to the signature."""
    fn = pol.fn
    sig = inspect.signature(fn)
    if pol.takes_ctx:
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        pass
    else:
        args, kwargs = bound.args, bound.kwargs
    return codec.dumps({"args": list(args), "kwargs": kwargs})


VALUES: list[Any] = [
    0, -1, 10**30, True, None, 'é\n"x\u2028\\', "", 1.5, -0.0, 1e300, [1, "a"], {"a": 1},
    {"$t": 1},
]  # fmt: skip
NAMES = ["x", "y", "z", "q", "n", "extra", "$t"]


@pytest.mark.parametrize("pol", [wide, strict, with_ctx], ids=lambda p: p.name)
def test_recorded_inputs_are_the_codecs_text_for_every_call_shape(pol: Any) -> None:
    checked = 0
    for npos in range(4):
        for nkw in range(3):
            for keys in itertools.permutations(NAMES, nkw):
                for i in range(3):  # each shape with other values, so plans are reused
                    args = tuple(VALUES[(i + 2 * j + npos) % len(VALUES)] for j in range(npos))
                    kwargs = {k: VALUES[(i + 3 * j) % len(VALUES)] for j, k in enumerate(keys)}
                    assert run_inputs(pol, "r", args, kwargs) == _codec_text(pol, args, kwargs), (
                        args,
                        kwargs,
                    )
                    checked += 1
    assert checked > 300


def test_keywords_are_recorded_like_positions_and_in_signature_order() -> None:
    by_position = run_inputs(wide, "r", (1, "a"), {})
    assert run_inputs(wide, "r", (), {"y": "a", "x": 1}) == by_position
    assert run_inputs(wide, "r", (1,), {"kw2": 2, "z": 0.5, "kw1": 1}) == (
        '{"args":[1],"kwargs":{"z":0.5,"kw2":2,"kw1":1}}'
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, 10**5000], ids=["nan", "inf", "huge"])
def test_what_cannot_be_recorded_is_refused_naming_the_run_and_argument(bad: Any) -> None:
    with pytest.raises(SerializationError, match=r"inputs of run 'r7'"):
        run_inputs(wide, "r7", (1, "a", bad), {})
    with pytest.raises(SerializationError, match=r"inputs of run 'r8'"):
        run_inputs(wide, "r8", (1,), {"z": bad})
