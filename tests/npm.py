"""npm packages for the tests that speak a protocol with its other side's
official JavaScript implementation (the AI SDK, AG-UI's client, MCP's
reference servers).

Each such test folder keeps a ``js/`` directory with its own
``package.json`` and ``package-lock.json``; :func:`npm_dir` runs ``npm ci``
there the first time a test asks (and again when the lock file changes), so
the README's test command sets everything up on a fresh machine. Without
``node`` and ``npm`` the tests skip, except under CI, where they fail.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

# Installing from the registry can take a while on a cold cache.
_INSTALL_TIMEOUT = 600


def node_missing() -> str | None:
    """None if ``node`` and ``npm`` are on the PATH, else why not."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install nodejs npm)"
    return None


def npm_dir(folder: Path) -> Path:
    """``folder`` (a ``js/`` directory holding ``package.json`` and its lock)
    with its ``node_modules`` installed and current; skips (fails under CI)
    where Node.js is missing or the install fails."""
    why = node_missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"Node.js is required under CI: {why}")
        pytest.skip(why)
    digest = hashlib.sha256((folder / "package-lock.json").read_bytes()).hexdigest()
    # pytest-xdist's workers may ask at once: one installs, the others wait.
    with (folder / ".npm-install.lock").open("w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        _install(folder, digest)
    return folder


def _install(folder: Path, digest: str) -> None:
    stamp = folder / "node_modules" / ".stalwart-lock-sha256"
    if stamp.is_file() and stamp.read_text() == digest:
        return
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=_INSTALL_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        message = f"npm ci in {folder} failed:\n{done.stderr[-4000:]}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    stamp.write_text(digest)
