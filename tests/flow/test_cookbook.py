"""PocketFlow's own cookbook programs, unchanged, run by `python -m stalwart run`.

Opt-in: ``STALWART_POCKETFLOW_COOKBOOK`` names the ``cookbook`` folder of a
fetched copy of The-Pocket/PocketFlow (never copied into this repository).
Each program's folder is copied to a temporary one (some programs write
next to themselves) and run there as it is: durably, then in memory with
``pocketflow`` served by ``stalwart.flow`` (what PocketFlow prints, as
tests/flow/test_compat.py holds it to), and the two outputs compared. The
interactive text converter is also killed after its second answer and run
again: it asks only the third question. Only programs that need neither a
model nor a package this project does not install are run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash import kill, spawn, wait_for_line

COOKBOOK = os.environ.get("STALWART_POCKETFLOW_COOKBOOK", "")

pytestmark = pytest.mark.skipif(
    not COOKBOOK or sys.platform == "win32",
    reason="opt-in: STALWART_POCKETFLOW_COOKBOOK names a fetched PocketFlow's cookbook folder",
)

# Program folder -> what its user types.
PROGRAMS = {
    "pocketflow-nested-batch": "",
    "pocketflow-flow": "Hello   World\n1\ny\nabc\n4\nn\n",
    "pocketflow-communication": "one two\nthree\nq\n",
}

# `python main.py` with `pocketflow` served by stalwart.flow, in memory.
IN_MEMORY = (
    "import runpy, sys, stalwart.flow; sys.modules['pocketflow'] = stalwart.flow; "
    "sys.path.insert(0, '.'); runpy.run_path('main.py', run_name='__main__')"
)


def program_folder(name: str, tmp_path: Path) -> Path:
    source = Path(COOKBOOK) / name
    if not (source / "main.py").is_file():
        pytest.fail(f"{source} has no main.py: is {COOKBOOK} a PocketFlow cookbook folder?")
    return Path(shutil.copytree(source, tmp_path / name))


def run(folder: Path, argv: list[str], given: str) -> str:
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=folder,
        input=given,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_cookbook_program_prints_under_stalwart_run_what_it_prints_in_memory(
    name: str, tmp_path: Path
) -> None:
    given = PROGRAMS[name]
    durable = program_folder(name, tmp_path / "durable")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    printed = run(durable, ["-m", "stalwart", "run", "main.py", "--store", url], given)
    plain = program_folder(name, tmp_path / "plain")
    assert printed == run(plain, ["-c", IN_MEMORY], given)
    # Finished: the same command replays its flows, asking nothing.
    run(durable, ["-m", "stalwart", "run", "main.py", "--store", url], "")


def test_the_text_converter_killed_after_two_answers_asks_only_the_third(
    tmp_path: Path,
) -> None:
    folder = program_folder("pocketflow-flow", tmp_path)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    command = ("-m", "stalwart", "run", "main.py", "--store", url)
    first = spawn(*command, env={"PYTHONUNBUFFERED": "1"}, cwd=folder, stdin=True)
    assert first.stdin is not None
    first.stdin.write("Hello World\n1\n")
    first.stdin.flush()
    wait_for_line(first, "Result: HELLO WORLD")  # both answers recorded; the third is asked
    kill(first)

    again = spawn(*command, cwd=folder, stdin=True)
    out, err = again.communicate("n\n", timeout=120)
    assert again.returncode == 0, err
    assert "Enter text to convert" not in out and "Your choice" not in out
    assert out.count("Convert another text? (y/n): ") == 1
    assert out.rstrip().endswith("Thank you for using Text Converter!")
