"""Input limits that hold before any handler runs, in process."""

from __future__ import annotations

import httpx

from signoff.server.app import API
from tests.server.calls import CALL


async def test_body_over_the_cap_is_413(agent: httpx.AsyncClient) -> None:
    """A body over 1 MiB is refused with 413 before any handler runs."""
    huge = {**CALL, "tool_args": {"blob": "x" * 1_100_000}}
    response = await agent.post(f"{API}/requests", json=huge)
    assert response.status_code == 413
