"""The other side of the UI protocols, for real: the AI SDK and AG-UI's
HttpAgent under Node.js (``js/``), against ``stalwart serve --execute`` in a
process of its own, which a test may SIGKILL and start again on its store."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import free_port

from .conftest import Server, spawn, stop, wait_ready

JS = Path(__file__).with_name("js")
APP = "tests/api/ui_app.py:policies"


def node(js: Path, script: str, *args: str, stdin: Any = None) -> list[dict[str, Any]]:
    """Run ``script`` under Node.js; the JSON lines it printed."""
    done = subprocess.run(
        ["node", str(js / script), *args],
        input=json.dumps(stdin if stdin is not None else {}),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=js,
        check=False,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@dataclass
class Served:
    """``stalwart serve --execute`` on a store, restartable on the same port."""

    store: str
    port: int
    proc: subprocess.Popen[str] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        args = ["serve", "--app", APP, "--store", self.store, "--port", str(self.port)]
        self.proc = spawn([*args, "--execute", "--no-auth"])
        wait_ready(self.base, self.proc)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; the ledger is what survives."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.communicate(timeout=20)

    def server(self) -> Server:
        assert self.proc is not None
        return Server(self.base, self.proc, None)


@contextlib.contextmanager
def ui_server(tmp_path: Path) -> Iterator[Served]:
    s = Served(f"sqlite:///{tmp_path / 'ui.db'}", free_port())
    s.start()
    try:
        yield s
    finally:
        if s.proc is not None and s.proc.poll() is None:
            print(f"server output: {stop(s.proc)}")
