"""A refused exclusive call, killed before the reply that read the refusal
was recorded, then resumed (S2).

Whether two exclusive calls cross their locks depends on timing. The refusal
is recorded as the call's step, so the resumed run, where nothing crosses,
replays the refusal: the call does not run, and the reply holds the same
error the killed process saw. A real process, SIGKILL, a real SQLite file.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

APP = str(Path(__file__).with_name("refusal_app.py"))


def _spawn(url: str, workdir: Path, action: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, APP, url, str(workdir), action, "crossed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ran(workdir: Path) -> list[str]:
    path = workdir / "ran.txt"
    return path.read_text().split() if path.exists() else []


def test_a_refused_call_replays_its_refusal_after_a_kill(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    first = _spawn(url, tmp_path, "run")
    assert first.stdout is not None
    line = first.stdout.readline()
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert line.startswith("refused "), first.stderr.read() if first.stderr else line
    refused = json.loads(line[len("refused ") :])
    assert refused.startswith("ExclusiveDeadlock: 'el_needs_a' (step "), refused
    assert _ran(tmp_path) == []  # nothing ran: X waits for b, Y's call was refused

    second = _spawn(url, tmp_path, "recover")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    result = next(
        json.loads(x[len("result ") :]) for x in out.splitlines() if x.startswith("result ")
    )

    # The refused call did not run on resume, though nothing crossed there;
    # the reply shows the refusal the killed process saw. X's call ran, once.
    assert _ran(tmp_path) == ["el_needs_b"]
    assert result == ["needs_b ran", refused]
