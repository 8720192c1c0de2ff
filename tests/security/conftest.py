"""Attack tests: each one plays the agent (or someone on the network) against a real server.

The ``server`` fixture (tests/conftest.py) starts a real ``signoff serve`` process on its own
SQLite file; ``tests.serving`` has ``agent_token``, ``bearer`` and ``start_server`` for more.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serving import Server, nodes_on


@pytest.fixture
def two_nodes(pg_database: str, tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    """Two real servers on one fresh PostgreSQL database, as docs/deployment.md runs them:
    the first printed the admin token, the second has ``--no-webhooks``."""
    with nodes_on(pg_database, tmp_path, 2, "--no-webhooks") as (first, second):
        yield first, second
