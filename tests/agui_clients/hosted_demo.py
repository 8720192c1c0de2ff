"""A real ``signoff serve`` hosting the demo chat agent, for clients signoff did not write.

The agent is ``signoff.chat.hosted:agent`` (the scripted demo model with the chat's file
tools) named :data:`AGENT`; its files go to the module's own workspace directory, so a test
can see on disk whether a gated call really ran, and how often.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from signoff.server.app import API
from tests.serving import Server, free_port, start_server

AGENT = "demo"
"""The name the server hosts the demo chat agent under."""


def runs_url(server: Server) -> str:
    """Where an AG-UI client posts its ``RunAgentInput``."""
    return f"{server.base}{API}/agents/{AGENT}/runs"


def serve_demo(home: Path, workspace: Path) -> Iterator[Server]:
    """Yield ``signoff serve --agent demo=signoff.chat.hosted:agent`` on its own SQLite file in
    ``home`` (also its ``XDG_CONFIG_HOME``), writing files into ``workspace``; for a module
    fixture."""
    workspace.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "SIGNOFF_WORKSPACE": str(workspace)}
    running = start_server(
        f"sqlite:///{home / 'serve.db'}",
        free_port(),
        env,
        "--agent",
        f"{AGENT}=signoff.chat.hosted:agent",
    )
    yield running
    if running.process.poll() is None:
        running.stop()
