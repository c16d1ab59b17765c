"""Record the demo agent answering a few questions, and export each run.

    python examples/replay_suite/record.py

writes ``recordings/<run id>.jsonl`` next to this file: the regression suite
(``test_replay_suite.py``) replays each of them against the agent's code.
In production the recordings come from the real store instead:
``stalwart runs export RUN_ID > recordings/RUN_ID.jsonl``.
"""

from __future__ import annotations

import asyncio
import io
import tempfile
from pathlib import Path

import stalwart as sw
from stalwart.demo.agent import research
from stalwart.timetravel import export_runs, write_export

HERE = Path(__file__).parent
QUESTIONS = {
    "walrus": "Which Python release introduced the walrus operator, "
    "and which release added pattern matching?",
    "speed": "Which Python release made CPython faster, and which release added exception groups?",
}


async def main() -> None:
    out = HERE / "recordings"
    out.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        async with sw.Runner(f"sqlite:///{Path(tmp) / 'ledger.db'}") as runner:
            for run_id, question in QUESTIONS.items():
                print(run_id, "->", (await runner.run(research, question, run_id=run_id))[:60])
                dumps = await export_runs(runner.store, run_id)
                buffer = io.StringIO()
                write_export(dumps, buffer)
                (out / f"{run_id}.jsonl").write_text(buffer.getvalue(), encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
