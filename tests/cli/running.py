"""Running the ``signoff`` command as a real subprocess on a real SQLite file."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

Run = Callable[..., subprocess.CompletedProcess[str]]
"""``cli(*args, timeout=...)``: run ``signoff ARGS`` and return the finished process."""


def submit(cli: Run, *extra: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Submit a shell call without waiting and return the printed JSON."""
    done = cli("submit", "--tool", "shell", "--args", json.dumps(args or {"command": "ls"}), *extra)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result
