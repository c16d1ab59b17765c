"""A keyword argument named "*" would be recorded under the name the ledger
gives positional arguments, so two different calls would share one identity
(S5) and replay could hand one call the other's result: it is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import stalwart as sw


@sw.policy
async def echo(*args: Any, **kwargs: Any) -> str:
    return repr((args, kwargs))


async def test_a_keyword_named_star_is_refused_with_the_step(tmp_path: Path) -> None:
    @sw.policy
    async def main() -> str:
        return await echo(1, **{"*": [2]})

    async with sw.Runner(f"sqlite:///{tmp_path}/r.db") as runner:
        with pytest.raises(sw.SerializationError, match=r"step .*may not be named '\*'"):
            await runner.run(main)


async def test_positional_and_other_keywords_still_record(tmp_path: Path) -> None:
    @sw.policy
    async def main() -> str:
        return await echo(2, x=3)

    async with sw.Runner(f"sqlite:///{tmp_path}/r.db") as runner:
        assert await runner.run(main) == repr(((2,), {"x": 3}))
