"""A real ``signoff serve`` hosting the demo chat agent, for clients signoff did not write.

The agent is ``signoff.chat.hosted:agent`` (the scripted demo model with the chat's file
tools) named :data:`AGENT`; its files go to the module's own workspace directory, so a test
can see on disk whether a gated call really ran, and how often.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from signoff.server.app import API
from tests.serving import DEMO, Server, serve_hosted

AGENT = DEMO.partition("=")[0]
"""The name the server hosts the demo chat agent under."""


def runs_url(server: Server) -> str:
    """Where an AG-UI client posts its ``RunAgentInput``."""
    return f"{server.base}{API}/agents/{AGENT}/runs"


def serve_demo(home: Path, workspace: Path | None = None) -> Iterator[Server]:
    """Yield ``signoff serve`` hosting the demo chat agent as :data:`AGENT` on its own SQLite
    file in ``home``, writing files into ``workspace`` (default ``home/workspace``); for a
    module fixture."""
    server, _ = serve_hosted(home, DEMO, workspace=workspace)
    yield server
    if server.process.poll() is None:
        server.stop()
