"""A mover that stops halfway, to be SIGKILLed there:
``python move_mover.py SOURCE TARGET STAGE``.

It moves run "R" with :func:`stalwart.timetravel.move_run`, but at STAGE it
prints "halfway" and hangs: ``parked`` when the run is parked on the source
and about to be marked moved, ``copied`` when it is marked and its first
run is copied into the target.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from stalwart.stores import open_store
from stalwart.timetravel import move_run

SOURCE, TARGET, STAGE = sys.argv[1], sys.argv[2], sys.argv[3]


async def _hang(*args: Any) -> Any:
    print("halfway", flush=True)
    await asyncio.sleep(600)


async def main() -> None:
    source, target = open_store(SOURCE), open_store(TARGET)
    await source.open()
    await target.open()
    if STAGE == "copied":
        real = target.import_run

        async def import_then_hang(dump: Any) -> bool:
            await real(dump)
            return bool(await _hang())

        target.import_run = import_then_hang  # type: ignore[method-assign]
    else:
        source.finish_run = _hang  # type: ignore[method-assign]
    await move_run(source, target, "R", timeout=30)


if __name__ == "__main__":
    asyncio.run(main())
