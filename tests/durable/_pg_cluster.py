"""A private, throwaway PostgreSQL cluster for tests that crash or restart the server.

The shared server on 127.0.0.1:5432 serves everyone's tests at once, so a
test that kills or restarts PostgreSQL must do it to a server of its own:
:func:`pg_cluster` makes one with ``initdb`` in a fresh directory, on a free
port, and removes it afterwards. initdb refuses to run as root, so as root
the cluster belongs to the ``postgres`` OS user.

:func:`pg_replicated` makes two: a primary and a streaming standby made
from it with ``pg_basebackup -R``, replicating synchronously (a commit
returns once the standby has flushed it), for failover tests.

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
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import free_port

__all__ = ["PrivateCluster", "pg_cluster", "pg_replicated"]


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

    def init(self, **extra: str) -> None:
        """Make the cluster, with ``extra`` settings beside the usual ones."""
        args = ["-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]
        self._run("initdb", *args)
        self._configure(**self._settings(), **extra)

    def _settings(self) -> dict[str, str]:
        return {
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

    def _configure(self, **settings: str) -> None:
        """Append ``settings`` to the cluster's configuration: a later line wins."""
        with (self.data / "postgresql.auto.conf").open("a") as f:
            for key, value in settings.items():
                f.write(f"{key} = {value}\n")

    def replica(self, root: Path, name: str) -> PrivateCluster:
        """A streaming standby of this (running) cluster in ``root``, made
        with ``pg_basebackup -R`` and connecting as ``name`` (the name
        ``synchronous_standby_names`` lists); not started yet."""
        standby = PrivateCluster(self.bin_dir, root)
        source = f"host=127.0.0.1 port={self.port} user=postgres application_name={name}"
        self._run("pg_basebackup", "-D", str(standby.data), "-R", "-X", "stream", "-d", source)
        # The copy carries this cluster's settings: its own port and socket
        # win, and it waits for no standby of its own once promoted (with
        # this cluster's list, every commit there would wait for ever).
        standby._configure(
            port=str(standby.port),
            unix_socket_directories=f"'{standby.root}'",
            synchronous_standby_names="''",
        )
        return standby

    def promote(self) -> None:
        """Make this standby a primary that takes writes (``pg_ctl promote``)."""
        self._run("pg_ctl", "promote", "-w", "-t", "60", "-D", str(self.data))

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


def _required_bin_dir(*tools: str) -> Path:
    """The bin directory holding the server binaries; else a skip (a
    failure under CI, which must exercise them)."""
    bin_dir = _bin_dir()
    missing = [t for t in tools if bin_dir is None or not (bin_dir / t).exists()]
    if bin_dir is None or missing:
        why = f"PostgreSQL server binaries ({', '.join(missing or tools)}) are not installed"
        if os.environ.get("CI"):
            pytest.fail(f"a private PostgreSQL cluster is required under CI: {why}")
        pytest.skip(why)
    return bin_dir


def _remove(cluster: PrivateCluster) -> None:
    try:
        if (cluster.data / "postmaster.pid").exists():
            cluster.stop("immediate")
    finally:
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[PrivateCluster]:
    """A PostgreSQL server of this test module's own, removed afterwards."""
    bin_dir = _required_bin_dir("initdb", "pg_ctl")
    cluster = PrivateCluster(bin_dir, Path(tempfile.mkdtemp(prefix="stalwart-pg-")))
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        _remove(cluster)


#: The standby's name, which the primary's ``synchronous_standby_names`` lists.
STANDBY = "standby1"


@pytest.fixture
def pg_replicated() -> Iterator[tuple[PrivateCluster, PrivateCluster]]:
    """A primary and its streaming standby, started, the standby replicating
    synchronously (``synchronous_commit = on``: a commit returns once the
    standby has flushed its WAL); both removed afterwards."""
    bin_dir = _required_bin_dir("initdb", "pg_ctl", "pg_basebackup")
    primary = PrivateCluster(bin_dir, Path(tempfile.mkdtemp(prefix="stalwart-pg-primary-")))
    standby: PrivateCluster | None = None
    try:
        primary.init(synchronous_standby_names=f"'{STANDBY}'", synchronous_commit="on")
        primary.start()
        standby = primary.replica(Path(tempfile.mkdtemp(prefix="stalwart-pg-standby-")), STANDBY)
        standby.start()
        _until_synchronous(primary)
        yield primary, standby
    finally:
        try:
            if standby is not None:
                _remove(standby)
        finally:
            _remove(primary)


def _until_synchronous(primary: PrivateCluster, timeout: float = 60) -> None:
    """Wait until the primary streams to its standby synchronously."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        with psycopg.connect(primary.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
                (STANDBY,),
            ).fetchone()
        if row is not None and row[0] == "sync":
            return
        assert time.monotonic() < deadline, f"the standby never replicated synchronously: {row}"
        time.sleep(0.05)
