"""A real ``signoff serve`` whose global tools.toml the test writes, for the policy attacks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tests.serving import Server, free_port, start_server


def serve_with_policy(tmp_path: Path, tools_toml: str) -> Iterator[Server]:
    """Yield a server on its own database with ``tools_toml`` as the global policy.

    The file goes to ``$XDG_CONFIG_HOME/signoff/tools.toml`` before the server starts, and
    the server runs in ``tmp_path`` so no project ``.signoff/tools.toml`` lies over it.
    """
    (tmp_path / "signoff").mkdir(exist_ok=True)
    (tmp_path / "signoff" / "tools.toml").write_text(tools_toml)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    running = start_server(
        f"sqlite:///{tmp_path / 'serve.db'}", free_port(), env, cwd=str(tmp_path)
    )
    yield running
    if running.process.poll() is None:
        running.stop()
