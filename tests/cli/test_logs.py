"""`stalwart worker --log-format json`: one JSON object a line on stderr, stable fields."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
from pathlib import Path

import stalwart as sw
from stalwart.cli.logs import JsonFormatter

APP = """
import stalwart as sw

@sw.policy
async def hello(name: str) -> str:
    return f"hello {name}"
"""


def test_a_json_worker_logs_only_json_lines(tmp_path: Path, sqlite_url: str) -> None:
    (tmp_path / "lapp.py").write_text(APP)
    url = sqlite_url
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stalwart.cli",
            "worker",
            "--store",
            url,
            "--app",
            str(tmp_path / "lapp.py"),
            "--log-format",
            "json",
            "--log-level",
            "info",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = json.loads(proc.stderr.readline())
        sys.path.insert(0, str(tmp_path))
        import lapp  # type: ignore[import-not-found]

        async def use() -> str:
            async with sw.Runner(url) as client:
                handle = await client.enqueue(lapp.hello, "log", run_id="log-1")
                return str(await handle.result(timeout=20))

        assert asyncio.run(use()) == "hello log"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        sys.path.remove(str(tmp_path))
    assert proc.returncode == 0, err
    assert out == ""  # nothing but logs, and they go to stderr
    lines = [first] + [json.loads(line) for line in err.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert first["message"].startswith("worker started") and first["level"] == "INFO"
    assert first["logger"] == "stalwart.worker" and first["store"] == url
    assert first["time"].endswith("Z") and first["concurrency"] == 50
    assert lines[-1]["message"] == "worker stopped"


def test_json_lines_mask_passwords_and_carry_extras_and_tracebacks() -> None:
    log = logging.getLogger("stalwart.test")
    try:
        raise ValueError("postgresql://app:s3cret@db/prod is down")
    except ValueError:
        record = log.makeRecord(
            "stalwart.test",
            logging.WARNING,
            __file__,
            1,
            "store %s slow",
            ("postgresql://u:pw@h/d",),
            sys.exc_info(),
            extra={"run_id": "r-1", "attempt": 2, "obj": object()},
        )
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "store postgresql://u:***@h/d slow"
    assert line["level"] == "WARNING" and line["logger"] == "stalwart.test"
    assert line["run_id"] == "r-1" and line["attempt"] == 2 and "object" in line["obj"]
    assert "s3cret" not in line["exception"] and "ValueError" in line["exception"]


def test_text_logs_escape_what_a_row_holds() -> None:
    """A policy name from a stored row, written by an adversary, can neither
    drive the terminal nor forge a second log line."""
    import io
    import logging

    from stalwart.cli.logs import LogFormat, configure_logging

    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.getLogger("stalwart").level)
    try:
        configure_logging("info", LogFormat.text)  # type: ignore[arg-type]
        handler = root.handlers[0]
        stream = io.StringIO()
        handler.setStream(stream)  # type: ignore[attr-defined]
        logging.getLogger("stalwart.runner").info(
            "run %r (%s) claimed", "r1", "evil\x1b[2J\n2026-01-01 INFO forged: all good"
        )
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
        logging.getLogger("stalwart").setLevel(saved[2])
    out = stream.getvalue()
    assert "\x1b" not in out
    assert out.count("\n") == 1, out  # one record, one line
    assert "\\x1b[2J" in out and "\\nforged" not in out and "\\n2026" in out
