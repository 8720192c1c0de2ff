"""Node and npm for the tests that run a JavaScript program (Gemini CLI, the AG-UI client)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def need_node(major: int, what: str) -> None:
    """Skip unless node ``major`` or later and npm are installed, which ``what`` needs; in CI,
    which must run these tests, fail instead."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        _missing("node and npm are not installed (apt-get install nodejs npm)")
    found = _node_major()
    if found is None or found < major:
        _missing(f"{what} needs node {major}+, found {found}")


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: .ci/run installs nodejs and npm)")
    pytest.skip(reason)


def _node_major() -> int | None:
    done = subprocess.run(
        ["node", "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    version = done.stdout.strip().lstrip("v").split(".")[0]
    return int(version) if done.returncode == 0 and version.isdigit() else None


@contextlib.contextmanager
def cache_lock(cache: Path) -> Iterator[None]:
    """Hold ``cache``'s lock file while checking and filling it: test processes running at once
    (xdist workers, two runs in one checkout) must not run npm into one directory together."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache.parent / f"{cache.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield
