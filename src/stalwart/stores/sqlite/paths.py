"""Why a SQLite file cannot be opened, in words.

SQLite answers every refusal by the operating system with one message,
"unable to open database file" (SQLITE_CANTOPEN), whether the path is a
directory, sits on a read-only filesystem, or lies under ``/proc``. After an
open has failed (never on the way to a write), :func:`why_unopenable` asks
the operating system the questions SQLite does not pass on, so the store's
error says which it is.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["why_unopenable"]

# Filesystems the kernel makes up: no ordinary file can be created on them.
_KERNEL_FILESYSTEMS = frozenset(
    {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "securityfs"}
)


def why_unopenable(path: str) -> str | None:
    """What keeps ``path`` from being a SQLite database, or None when the
    operating system sees nothing wrong (the file itself is then the problem)."""
    target = Path(path)
    parent = target.parent
    try:
        if target.is_dir():
            return "it is a directory, not a file"
        if not parent.exists():
            return f"its folder {str(parent)!r} does not exist"
        if not parent.is_dir():
            return f"{str(parent)!r} is not a folder"
    except OSError as exc:
        return f"the path cannot be looked at: {exc.strerror}"
    fstype, read_only = _filesystem_of(target)
    if fstype in _KERNEL_FILESYSTEMS:
        return f"it is on {fstype}, a filesystem the kernel makes up, which holds no database"
    if read_only:
        return "it is on a read-only filesystem"
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return _cannot_create(target)
    except OSError as exc:
        return f"the file cannot be looked at: {exc.strerror}"
    if not stat.S_ISREG(mode):
        return "it is not a regular file (a device, a pipe or a socket)"
    try:
        os.close(os.open(target, os.O_RDWR))
    except OSError as exc:
        return f"the file cannot be opened for writing: {_reason(exc)}"
    return _cannot_write_beside(parent)


def _cannot_create(target: Path) -> str | None:
    """Why a new file cannot be made at ``target`` (the probe is removed)."""
    try:
        fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return None  # made meanwhile by someone else: nothing to say
    except OSError as exc:
        return f"the file cannot be created: {_reason(exc)}"
    os.close(fd)
    with contextlib.suppress(OSError):
        target.unlink()
    return _cannot_write_beside(target.parent)


def _cannot_write_beside(parent: Path) -> str | None:
    """SQLite keeps its ``-wal`` and ``-shm`` files beside the database."""
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".stalwart-probe-")
    except OSError as exc:
        return (
            f"no file can be created in its folder {str(parent)!r} "
            f"(SQLite keeps its -wal and -shm files there): {_reason(exc)}"
        )
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _reason(exc: OSError) -> str:
    if exc.errno in (1, 13):  # EPERM, EACCES
        return f"permission denied ({exc.strerror}; an immutable file or a locked-down folder?)"
    return exc.strerror or str(exc)


def _filesystem_of(target: Path) -> tuple[str | None, bool]:
    """The type of the filesystem ``target`` is on and whether it is mounted
    read-only, from the longest mount point above it (Linux); (None, False)
    where the mount table cannot be read."""
    try:
        resolved = target.parent.resolve() / target.name
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as table:
            mounts = [line.split() for line in table]
    except OSError:
        return None, False
    best: tuple[int, str, bool] = (-1, "", False)
    text = str(resolved)
    for fields in mounts:
        if len(fields) < 4:
            continue
        point = fields[1].replace("\\040", " ")
        inside = text == point or text.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best[0]:  # a later mount on a point hides earlier ones
            best = (len(point), fields[2], "ro" in fields[3].split(","))
    if best[0] < 0:
        return None, False
    return best[1], best[2]
