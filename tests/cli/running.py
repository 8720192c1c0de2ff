"""Running the ``signoff`` command as a real subprocess: on a local file, or against a server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from tests.serving import Server

Run = Callable[..., subprocess.CompletedProcess[str]]
"""``cli(*args, timeout=...)``: run ``signoff ARGS`` and return the finished process."""


def submit(cli: Run, *extra: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Submit a shell call without waiting and return the printed JSON."""
    done = cli("submit", "--tool", "shell", "--args", json.dumps(args or {"command": "ls"}), *extra)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def remote(server: Server, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``signoff ARGS --server URL --token T``."""
    return subprocess.run(
        [sys.executable, "-m", "signoff", *args, "--server", server.base, "--token", token],
        capture_output=True,
        text=True,
        env=server.env,
        timeout=60,
        check=False,
    )
