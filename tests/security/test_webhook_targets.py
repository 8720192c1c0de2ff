"""Attack: a webhook aimed at the server's own network, and a delivery replayed with new headers."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from signoff.domain.webhooks import verify_signature
from signoff.server.app import API
from tests.serving import Receiver, Server, agent_token, bearer, free_port, start_server

PRIVATE_TARGETS = [
    "http://127.0.0.1/hook",
    "http://127.0.0.1:9/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://localhost/",
    "http://0.0.0.0/",
    "http://2130706433/",
]


@pytest.fixture
def permissive_server(tmp_path: Path) -> Iterator[Server]:
    """A server started with --allow-private-webhooks."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    running = start_server(
        f"sqlite:///{tmp_path / 'serve.db'}", free_port(), env, "--allow-private-webhooks"
    )
    yield running
    if running.process.poll() is None:
        running.stop()


def test_private_targets_are_refused_by_default(server: Server) -> None:
    """Loopback, metadata, private and names or forms resolving there: 422, nothing stored."""
    assert server.admin_token is not None
    with httpx.Client(base_url=server.base, headers=bearer(server.admin_token)) as http:
        for url in PRIVATE_TARGETS:
            answer = http.post(f"{API}/webhooks", json={"url": url})
            assert answer.status_code == 422, (url, answer.text)
            assert answer.json()["error"] == "InvalidRequest"
            assert "--allow-private-webhooks" in answer.json()["detail"]
        assert http.get(f"{API}/webhooks").json()["items"] == []


def test_private_targets_are_allowed_with_the_flag(permissive_server: Server) -> None:
    """With --allow-private-webhooks the operator may point webhooks at internal hosts."""
    admin = permissive_server.admin_token
    assert admin is not None
    with httpx.Client(base_url=permissive_server.base, headers=bearer(admin)) as http:
        for url in PRIVATE_TARGETS:
            answer = http.post(f"{API}/webhooks", json={"url": url})
            assert answer.status_code == 201, (url, answer.text)


async def test_the_signature_covers_delivery_id_and_event_type(
    permissive_server: Server, receiver: Receiver
) -> None:
    """A real delivery verifies as sent, and fails once X-Signoff-Delivery or the event changes."""
    admin = permissive_server.admin_token
    assert admin is not None
    agent = agent_token(permissive_server)
    async with httpx.AsyncClient(base_url=permissive_server.base, timeout=30) as http:
        added = await http.post(
            f"{API}/webhooks", json={"url": receiver.url}, headers=bearer(admin)
        )
        assert added.status_code == 201, added.text
        secret = added.json()["secret"]
        made = await http.post(
            f"{API}/requests", json={"session_id": "s", "tool_name": "t"}, headers=bearer(agent)
        )
        assert made.status_code == 201, made.text
    await asyncio.wait_for(receiver.arrived.wait(), 20)
    headers, body = receiver.received[0]
    signature, delivery, event = (
        headers["x-signoff-signature"],
        headers["x-signoff-delivery"],
        headers["x-signoff-event"],
    )
    now = int(time.time())

    def verifies(delivery_id: str, event_type: str) -> bool:
        return verify_signature(
            secret, signature, body, delivery_id=delivery_id, event_type=event_type, now=now
        )

    assert event == "created" and verifies(delivery, event)
    assert not verifies(delivery[:-1] + ("A" if delivery[-1] != "A" else "B"), event)
    assert not verifies(delivery, "decided")
