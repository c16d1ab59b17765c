"""`python -m stalwart run PROGRAM.py`: an unmodified PocketFlow program, run as a
real process, SIGKILLed mid-flow and run again, resumes where it stopped.

The programs are written here, in PocketFlow's style (`from pocketflow
import ...`); each exec appends its tag to a file first (the harness's
`executions`), so what ran is read from outside the killed process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash import executions, kill, spawn, wait_for_line

from .conftest import invoke, run_cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

# Four nodes; the exec named by $STALL (if any) prints "stalled" and hangs.
PIPELINE = """
import os
import sys
import time

from pocketflow import BatchNode, Flow, Node

COUNT = sys.argv[1]


def executed(tag):
    with open(COUNT, "a") as f:
        f.write(tag + "\\n")
    print("executed", tag, flush=True)
    if os.environ.get("STALL") == tag:
        print("stalled", tag, flush=True)
        time.sleep(3600)


class Fetch(Node):
    def exec(self, _):
        executed("fetch")
        return ["alpha", "beta", "gamma"]

    def post(self, shared, prep_res, exec_res):
        shared["words"] = exec_res


class Measure(BatchNode):
    def prep(self, shared):
        return shared["words"]

    def exec(self, word):
        executed("measure:" + word)
        return len(word)

    def post(self, shared, prep_res, exec_res):
        shared["lengths"] = exec_res


class Report(Node):
    def prep(self, shared):
        return shared["words"], shared["lengths"]

    def exec(self, inputs):
        executed("report")
        words, lengths = inputs
        return ", ".join(f"{w}={n}" for w, n in zip(words, lengths))

    def post(self, shared, prep_res, exec_res):
        shared["report"] = exec_res


fetch = Fetch()
fetch >> Measure() >> Report()
shared = {"source": "test"}
Flow(start=fetch).run(shared)
print("RESULT", shared["report"], sorted(shared))
"""

# Three questions: one in a prep, one in an exec, one in a post.
QUIZ = """
import os
import time

from pocketflow import Flow, Node


class Name(Node):
    def prep(self, shared):
        return input("Name?\\n")

    def post(self, shared, prep_res, exec_res):
        shared["name"] = prep_res
        print("got", prep_res, flush=True)


class Color(Node):
    def exec(self, _):
        color = input("Color?\\n")
        print("got", color, flush=True)
        if os.environ.get("STALL"):
            time.sleep(3600)
        return color

    def post(self, shared, prep_res, exec_res):
        shared["color"] = exec_res


class Food(Node):
    def post(self, shared, prep_res, exec_res):
        shared["food"] = input("Food?\\n")


name = Name()
name >> Color() >> Food()
shared = {}
Flow(start=name).run(shared)
print(f"RESULT {shared['name']} likes {shared['color']} and {shared['food']}")
"""

UNBUFFERED = {"PYTHONUNBUFFERED": "1"}


def stalwart_run(
    *args: object, env: dict[str, str] | None = None, stdin: bool = False
) -> subprocess.Popen[str]:
    return spawn("-m", "stalwart", "run", *args, env={**UNBUFFERED, **(env or {})}, stdin=stdin)


def finish(proc: subprocess.Popen[str], given: str = "") -> str:
    out, err = proc.communicate(given if proc.stdin else None, timeout=60)
    assert proc.returncode == 0, err
    return out


def test_a_killed_program_resumes_running_each_finished_exec_once(tmp_path: Path) -> None:
    program = tmp_path / "pipeline.py"
    program.write_text(PIPELINE)
    count = tmp_path / "count.txt"
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    first = stalwart_run(program, count, "--store", url, env={"STALL": "measure:beta"})
    wait_for_line(first, "stalled")
    kill(first)
    assert executions(count) == ["fetch", "measure:alpha", "measure:beta"]

    resumed = finish(stalwart_run(program, count, "--store", url))
    # Only what had not finished ran again: the item that was executing, then the rest.
    assert executions(count) == [
        "fetch",
        "measure:alpha",
        "measure:beta",
        "measure:beta",
        "measure:gamma",
        "report",
    ]
    whole = tmp_path / "uninterrupted.txt"
    plain = finish(stalwart_run(program, whole, "--store", f"sqlite:///{tmp_path / 'b.db'}"))
    assert resumed.splitlines()[-1] == plain.splitlines()[-1]
    assert plain.splitlines()[-1] == (
        "RESULT alpha=5, beta=4, gamma=5 ['lengths', 'report', 'source', 'words']"
    )


def test_a_program_killed_after_two_answers_asks_only_the_third(tmp_path: Path) -> None:
    program = tmp_path / "quiz.py"
    program.write_text(QUIZ)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    first = stalwart_run(program, "--store", url, env={"STALL": "1"}, stdin=True)
    assert first.stdin is not None
    assert wait_for_line(first, "Name?") == ["Name?"]
    first.stdin.write("Ada\n")
    first.stdin.flush()
    assert wait_for_line(first, "Color?") == ["got Ada", "Color?"]
    first.stdin.write("blue\n")
    first.stdin.flush()
    wait_for_line(first, "got blue")  # recorded before input() returned
    kill(first)

    again = stalwart_run(program, "--store", url, stdin=True)
    out = finish(again, "pizza\n")
    assert out.splitlines() == ["got blue", "Food?", "RESULT Ada likes blue and pizza"]


def test_pocketflow_is_served_in_the_command_only(tmp_path: Path) -> None:
    installed = tmp_path / "site"
    installed.mkdir()
    (installed / "pocketflow.py").write_text("REAL = True\n")
    program = tmp_path / "which.py"
    program.write_text("import pocketflow\nprint(pocketflow.__name__)\n")
    env = {"PYTHONPATH": f"{installed}:{Path(__file__).parents[2] / 'src'}"}
    done = run_cli(tmp_path, "run", "which.py", "--store", "sqlite:///w.db", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stalwart.flow"
    after = subprocess.run(
        [sys.executable, "-c", "import pocketflow; print(pocketflow.__name__, pocketflow.REAL)"],
        capture_output=True,
        text=True,
        env={"PATH": "", "PYTHONPATH": str(installed)},
        timeout=60,
    )
    assert after.stdout.strip() == "pocketflow True", after.stderr


def test_a_program_that_raises_shows_its_traceback_and_names_the_flow_and_run(
    tmp_path: Path,
) -> None:
    (tmp_path / "broken.py").write_text(
        "from pocketflow import Flow, Node\n"
        "\n"
        "class Fetch(Node):\n"
        "    def exec(self, _):\n"
        "        raise ValueError('the page is gone')\n"
        "\n"
        "Flow(start=Fetch()).run({})\n"
    )
    store = ("--store", "sqlite:///b.db", "--run-id", "broken-1")
    done = run_cli(tmp_path, "run", "broken.py", *store)
    assert done.returncode == 1
    assert 'File "broken.py", line 5, in exec' in done.stderr
    assert "stalwart" not in done.stderr.split("ValueError")[0]  # the program's frames only
    last = " ".join(done.stderr.strip().splitlines()[-1].split())
    assert last.startswith(
        "error: the program 'broken.py', flow Flow-Fetch (run 'broken-1') raised "
        "ValueError: the page is gone; the run is recorded as failed"
    )
    again = run_cli(tmp_path, "run", "broken.py", *store)  # replayed, not run again
    assert again.returncode == 1 and "the page is gone" in again.stderr


def test_the_program_exit_code_is_the_commands(tmp_path: Path) -> None:
    (tmp_path / "leave.py").write_text("import sys\nprint('bye')\nsys.exit(3)\n")
    done = invoke("run", str(tmp_path / "leave.py"), "--store", f"sqlite:///{tmp_path / 'l.db'}")
    assert (done.exit_code, done.stdout) == (3, "bye\n")


# A node makes a table and a picture, the next one stalls; the last one reads both.
CHART = """
import os
import sys
import time

import pandas as pd
from PIL import Image
from pocketflow import Flow, Node

COUNT = sys.argv[1]


def executed(tag):
    with open(COUNT, "a") as f:
        f.write(tag + "\\n")
    print("executed", tag, flush=True)
    if os.environ.get("STALL") == tag:
        print("stalled", tag, flush=True)
        time.sleep(3600)


class Load(Node):
    def exec(self, _):
        executed("load")
        return pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [3.5, 19.0]})

    def post(self, shared, prep_res, exec_res):
        shared["table"] = exec_res


class Draw(Node):
    def prep(self, shared):
        return shared["table"]

    def exec(self, table):
        executed("draw")
        img = Image.new("L", (len(table), 1))
        for x, t in enumerate(table["temp"]):
            img.putpixel((x, 0), int(t * 10))
        return img

    def post(self, shared, prep_res, exec_res):
        shared["chart"] = exec_res


class Caption(Node):
    def prep(self, shared):
        return shared["table"], shared["chart"]

    def exec(self, inputs):
        executed("caption")
        table, chart = inputs
        return f"{len(table)} cities, warmest {table['temp'].max()}, pixels {list(chart.tobytes())}"

    def post(self, shared, prep_res, exec_res):
        shared["caption"] = exec_res


load = Load()
load >> Draw() >> Caption()
shared = {}
Flow(start=load).run(shared)
print("RESULT", shared["caption"], type(shared["table"]).__name__, shared["chart"].mode)
"""


def test_a_program_whose_nodes_make_tables_and_images_resumes_with_their_codecs(
    tmp_path: Path,
) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("PIL")
    program = tmp_path / "chart.py"
    program.write_text(CHART)
    count = tmp_path / "count.txt"
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    codecs = ("--codec", "pandas", "--codec", "pil")

    refused = run_cli(tmp_path, "run", "chart.py", count, "--store", url)
    assert refused.returncode == 1
    assert "(Load.exec)" in refused.stderr and "--codec pandas" in refused.stderr

    url = f"sqlite:///{tmp_path / 'kept.db'}"
    count.unlink()
    first = stalwart_run(program, count, "--store", url, *codecs, env={"STALL": "caption"})
    wait_for_line(first, "stalled")
    kill(first)
    resumed = finish(stalwart_run(program, count, "--store", url, *codecs))
    assert executions(count) == ["load", "draw", "caption", "caption"]
    assert resumed.splitlines()[-1] == (
        "RESULT 2 cities, warmest 19.0, pixels [35, 190] DataFrame L"
    )


def test_an_unknown_codec_is_refused_before_the_program_starts(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("print('ran')\n")
    done = run_cli(tmp_path, "run", "p.py", "--codec", "arrow", "--store", "sqlite:///p.db")
    assert done.returncode == 2
    assert "ran" not in done.stdout
    assert "no codec named 'arrow'; the codecs are numpy, pandas, pil" in done.stderr
