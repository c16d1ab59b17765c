"""PocketFlow's own cookbook programs, unchanged, run by `python -m stalwart run`.

Opt-in: ``STALWART_POCKETFLOW_COOKBOOK`` names the ``cookbook`` folder of a
fetched copy of The-Pocket/PocketFlow (never copied into this repository).
Each program runs in a temporary copy of its folder (some write next to
themselves), first with the real PocketFlow from PyPI (``python main.py`` in
a virtualenv of its own: ``STALWART_POCKETFLOW_PYTHON`` names its
interpreter, else one is made once in pytest's cache), then durably, in the
same folder, and the two outputs must be equal. The same command run again
replays: the model is asked nothing. Programs that call a model reach the
deterministic offline stand-in of ``offline_model.py`` through the official
SDKs, unchanged. Some are killed (SIGKILL) while a model call is in flight,
then run again: the output goes on where it stopped and the model is asked
once more than in an uninterrupted run, the call that was in flight.

Only programs that need neither a service nor a package this project does
not install are run, and only those whose output does not depend on chance
(three print the time, which is left out of the comparison).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.crash import kill, spawn, wait_for_line

from .offline_model import OfflineModel, offline_model

COOKBOOK = os.environ.get("STALWART_POCKETFLOW_COOKBOOK", "")
POCKETFLOW_VERSION = "0.0.3"

pytestmark = pytest.mark.skipif(
    not COOKBOOK or sys.platform == "win32",
    reason="opt-in: STALWART_POCKETFLOW_COOKBOOK names a fetched PocketFlow's cookbook folder",
)

# Program folder -> what its user types. Those above the blank line need no
# model; the others ask the offline one.
PROGRAMS = {
    "pocketflow-batch-flow": "",
    "pocketflow-batch-node": "",
    "pocketflow-communication": "one two\nthree\nq\n",
    "pocketflow-flow": "Hello   World\n1\ny\nabc\n4\nn\n",
    "pocketflow-nested-batch": "",
    "pocketflow-parallel-batch-flow": "",
    "pocketflow-tool-database": "",
    #
    "pocketflow-agent-skills": "",
    "pocketflow-agentic-rag": "",
    "pocketflow-batch": "",
    "pocketflow-chat": "hello\nwhat about paris\nexit\n",
    "pocketflow-chat-guardrail": "hello\nwhat about paris\nexit\n",
    "pocketflow-code-generator": "",
    "pocketflow-debate": "",
    "pocketflow-heartbeat": "",
    "pocketflow-hello-world": "",
    "pocketflow-judge": "",
    "pocketflow-lead-generation": "",
    "pocketflow-majority-vote": "",
    "pocketflow-map-reduce": "",
    "pocketflow-node": "",
    "pocketflow-structured-output": "",
    "pocketflow-workflow": "",
}

# Programs whose shared store holds values JSON cannot: the codecs they need.
CODECS = {
    "pocketflow-batch-flow": ["pil"],
    "pocketflow-parallel-batch-flow": ["pil", "numpy"],
}

# Programs that print the clock: what is compared without it.
CLOCK = {
    "pocketflow-batch": re.compile(r"\d+\.\d+ seconds"),
    "pocketflow-parallel-batch-flow": re.compile(r"\d+\.\d+"),  # seconds taken, speedup
    "pocketflow-tool-database": re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"),  # now
}

# Program folder -> the model call (1 = the first) it is killed during.
KILLED_AT = {
    "pocketflow-agentic-rag": 2,
    "pocketflow-batch": 4,  # its fourth item of eight
    "pocketflow-chat": 2,  # its answer to the second message
    "pocketflow-chat-guardrail": 3,
    "pocketflow-code-generator": 4,
    "pocketflow-debate": 2,
    "pocketflow-judge": 2,
    "pocketflow-lead-generation": 2,
    "pocketflow-majority-vote": 3,
    "pocketflow-map-reduce": 3,
    "pocketflow-workflow": 3,
}

# What the user of a killed interactive program types when it runs again:
# only what it had not asked before it was killed.
TYPED_AFTER_KILL = {"pocketflow-chat": "exit\n", "pocketflow-chat-guardrail": "exit\n"}


@pytest.fixture(scope="session")
def pocketflow_python(request: pytest.FixtureRequest) -> str:
    """An interpreter that imports the real PocketFlow and sees this
    environment's packages (the SDKs, pandas, pillow...)."""
    given = os.environ.get("STALWART_POCKETFLOW_PYTHON")
    if given:
        return given
    venv = Path(request.config.cache.mkdir("pocketflow-venv"))
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True
        )
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"pocketflow=={POCKETFLOW_VERSION}"],
            check=True,
        )
    return str(python)


@pytest.fixture(scope="module")
def model() -> Iterator[OfflineModel]:
    with offline_model() as running:
        yield running


@pytest.fixture
def env(model: OfflineModel) -> dict[str, str]:
    model.reset()
    return {**os.environ, **model.env, "PYTHONUNBUFFERED": "1"}


def fresh_copy(name: str, tmp_path: Path) -> Path:
    """The program's folder, copied anew to the same place each time (so
    paths it prints are the same in every run), as ``cookbook/<name>`` beside
    the repository's README, which one program reads."""
    source = Path(COOKBOOK) / name
    if not (source / "main.py").is_file():
        pytest.fail(f"{source} has no main.py: is {COOKBOOK} a PocketFlow cookbook folder?")
    readme = Path(COOKBOOK).parent / "README.md"
    if readme.is_file() and not (tmp_path / readme.name).exists():
        shutil.copy(readme, tmp_path / readme.name)
    folder = tmp_path / "cookbook" / name
    shutil.rmtree(folder, ignore_errors=True)
    return Path(shutil.copytree(source, folder))


def stalwart_run(name: str, url: str) -> list[str]:
    codecs = [arg for codec in CODECS.get(name, []) for arg in ("--codec", codec)]
    return ["-m", "stalwart", "run", "main.py", "--store", url, *codecs]


def run(python: str, folder: Path, argv: list[str], given: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [python, *argv],
        cwd=folder,
        input=given,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def without_clock(name: str, printed: str) -> str:
    clock = CLOCK.get(name)
    return clock.sub("<clock>", printed) if clock else printed


def lines(text: str) -> list[str]:
    """The printed lines, blank ones aside."""
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_cookbook_program_prints_under_stalwart_run_what_it_prints_under_pocketflow(
    name: str,
    tmp_path: Path,
    pocketflow_python: str,
    model: OfflineModel,
    env: dict[str, str],
) -> None:
    given = PROGRAMS[name]
    folder = fresh_copy(name, tmp_path)
    printed = run(pocketflow_python, folder, ["main.py"], given, env)
    asked = model.requests

    model.reset()
    folder = fresh_copy(name, tmp_path)
    command = stalwart_run(name, f"sqlite:///{tmp_path / 'ledger.db'}")
    durable = run(sys.executable, folder, command, given, env)
    assert without_clock(name, durable) == without_clock(name, printed)
    assert model.requests == asked  # each finished node's exec once

    # Finished: the same command replays its flows, asking nothing.
    model.reset()
    run(sys.executable, folder, command, "", env)
    assert model.requests == 0


@pytest.mark.parametrize("name", sorted(KILLED_AT))
def test_a_cookbook_program_killed_during_a_model_call_asks_only_that_call_again(
    name: str,
    tmp_path: Path,
    pocketflow_python: str,
    model: OfflineModel,
    env: dict[str, str],
) -> None:
    folder = fresh_copy(name, tmp_path)
    uninterrupted = run(pocketflow_python, folder, ["main.py"], PROGRAMS[name], env)
    asked = model.requests

    model.reset()
    killed_at = KILLED_AT[name]
    model.hold(killed_at)
    folder = fresh_copy(name, tmp_path)
    command = stalwart_run(name, f"sqlite:///{tmp_path / 'ledger.db'}")
    first = subprocess.Popen(
        [sys.executable, *command],
        cwd=folder,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert first.stdin is not None
    first.stdin.write(PROGRAMS[name])
    first.stdin.close()
    assert model.arrived.wait(timeout=120), "the program never made the call to kill it in"
    kill(first)
    model.release()
    assert first.stdout is not None
    before = without_clock(name, first.stdout.read())

    model.reset()
    typed = TYPED_AFTER_KILL.get(name, "")
    after = without_clock(name, run(sys.executable, folder, command, typed, env))
    # The resumed run prints again what the program prints outside its flows
    # and the node that was running prints again what its prep printed; the
    # rest it prints once: together, the uninterrupted output.
    seen = set(lines(before))
    resumed = lines(after)
    while resumed and resumed[0] in seen:
        resumed.pop(0)
    assert lines(before) + resumed == lines(without_clock(name, uninterrupted))
    # The calls answered before the kill are not made again; the one in
    # flight is.
    assert killed_at + model.requests == asked + 1


def test_the_text_converter_killed_after_two_answers_asks_only_the_third(
    tmp_path: Path,
) -> None:
    folder = fresh_copy("pocketflow-flow", tmp_path)
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
