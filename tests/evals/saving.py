"""A process that saves one dataset the moment it is told to.

``python -m tests.evals.saving URL WHO GO``: opens the store, prints
``ready``, waits for the file ``GO`` to exist, then saves dataset
``shared`` with cases of its own (ids ``WHO-0`` ... ``WHO-39``, each
expecting ``WHO``) and prints ``saved VERSION``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import stalwart as sw
from stalwart.evals import Dataset, DatasetCase, DatasetStore

CASES = 40


async def main(url: str, who: str, go: Path) -> None:
    async with sw.Runner(url) as runner:
        datasets = DatasetStore(runner.store)
        cases = [DatasetCase(f"{who}-{i}", [who, i], expected=who) for i in range(CASES)]
        print("ready", flush=True)
        _wait_for(go)
        saved = await datasets.save(Dataset("shared", cases, description=who))
        print(f"saved {saved.version}", flush=True)


def _wait_for(go: Path) -> None:
    """Spin until ``go`` exists: every saver starts within a millisecond."""
    while not go.exists():
        time.sleep(0.001)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
