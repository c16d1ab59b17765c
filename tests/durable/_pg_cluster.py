"""A private, throwaway PostgreSQL cluster for tests that crash or restart the server.

The shared server on 127.0.0.1:5432 serves everyone's tests at once, so a
test that kills or restarts PostgreSQL must do it to a server of its own:
:func:`pg_cluster` makes one with ``initdb`` in a fresh directory, on a free
port, and removes it afterwards. initdb refuses to run as root, so as root
the cluster belongs to the ``postgres`` OS user.

Without the PostgreSQL server binaries the tests skip, except under CI
(``CI`` set), where a missing binary is a failure: CI must exercise them.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import free_port

__all__ = ["PrivateCluster", "pg_cluster"]


def _bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory that has initdb and pg_ctl."""
    found = [
        Path(d)
        for d in glob.glob("/usr/lib/postgresql/*/bin")
        if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists()
    ]
    found.sort(key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0)
    if found:
        return found[-1]
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path and shutil.which("pg_ctl") else None


class PrivateCluster:
    """One PostgreSQL server in a directory of its own; trust auth, user ``postgres``."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        # initdb and the server refuse root: hand everything to postgres.
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(root, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, tool: str, *args: str) -> None:
        cmd = [*self._as, str(self.bin_dir / tool), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n{log}"
            )

    def init(self) -> None:
        args = ["-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]
        self._run("initdb", *args)
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            "max_connections": "60",
            "shared_buffers": "32MB",
            "fsync": "off",  # the OS does not crash in these tests, only the server
            "full_page_writes": "off",
            # The WAL writer flushes asynchronous commits late, so a crash
            # right after a few of them loses them (what group mode risks).
            "wal_writer_delay": "10000ms",
            "wal_writer_flush_after": "0",
        }
        with (self.data / "postgresql.auto.conf").open("a") as f:
            for key, value in settings.items():
                f.write(f"{key} = {value}\n")

    def start(self) -> None:
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log))

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data))

    def crash(self) -> None:
        """Stop the server the way a power cut would, then start it again:
        with ``-m immediate`` nothing is flushed, and the start recovers."""
        self.stop("immediate")
        self.start()

    def restart(self) -> None:
        """A clean restart: every connection is dropped, nothing is lost."""
        self.stop("fast")
        self.start()


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[PrivateCluster]:
    """A PostgreSQL server of this test module's own, removed afterwards."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        why = "PostgreSQL server binaries (initdb, pg_ctl) are not installed"
        if os.environ.get("CI"):
            pytest.fail(f"a private PostgreSQL cluster is required under CI: {why}")
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="stalwart-pg-"))
    cluster = PrivateCluster(bin_dir, root)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        try:
            if (cluster.data / "postmaster.pid").exists():
                cluster.stop("immediate")
        finally:
            shutil.rmtree(root, ignore_errors=True)
