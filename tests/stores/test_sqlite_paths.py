"""A SQLite file that cannot be opened: the error says why, and names the path.

SQLite itself says "unable to open database file" for all of these; the
store's error says which it is. Real paths only: a directory, a missing or
non-folder parent, a kernel filesystem (/proc), an immutable file (chattr)
and a read-only mount. The tests run as root, which ignores file modes, so
"read-only" is made with chattr and a read-only tmpfs (skipped where the
machine allows neither).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.core.errors import StoreError
from stalwart.stores.sqlite import SQLiteStore


async def open_error(path: Path | str) -> str:
    store = SQLiteStore(path)
    with pytest.raises(StoreError) as caught:
        await store.open()
    await store.close()
    return str(caught.value)


async def test_a_directory_is_named_as_one(tmp_path: Path) -> None:
    message = await open_error(tmp_path)
    assert repr(str(tmp_path)) in message
    assert "it is a directory" in message


async def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "ledger.db"
    message = await open_error(path)
    assert repr(str(path)) in message
    assert "does not exist" in message


async def test_a_parent_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a folder")
    path = tmp_path / "notes.txt" / "ledger.db"
    message = await open_error(path)
    assert repr(str(path)) in message
    assert f"{str(tmp_path / 'notes.txt')!r} is not a folder" in message


async def test_a_path_under_proc_says_it_is_a_kernel_filesystem() -> None:
    path = f"/proc/stalwart-{uuid.uuid4().hex[:8]}.db"
    message = await open_error(path)
    assert repr(path) in message
    assert "on proc, a filesystem the kernel makes up" in message


@pytest.fixture
def immutable_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ledger.db"
    path.touch()
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not allowed here: {made.stderr.decode().strip()}")
    yield path
    subprocess.run(["chattr", "-i", str(path)], check=True)


async def test_a_file_that_cannot_be_written_says_permission_denied(immutable_file: Path) -> None:
    message = await open_error(immutable_file)
    assert repr(str(immutable_file)) in message
    assert "the file cannot be opened for writing: permission denied" in message


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "ro"
    point.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(point)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {made.stderr.decode().strip()}")
    yield point
    subprocess.run(["umount", str(point)], check=True)


async def test_a_read_only_filesystem_is_named(read_only_mount: Path) -> None:
    path = read_only_mount / "ledger.db"
    message = await open_error(path)
    assert repr(str(path)) in message
    assert "it is on a read-only filesystem" in message
