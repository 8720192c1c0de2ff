"""``signoff webhooks`` (add, list, deliveries, redeliver, remove) against a real server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.running import remote
from tests.serving import Receiver, Server, free_port, start_server


@pytest.fixture
def hooks_server(tmp_path: Path) -> Iterator[Server]:
    """A server that may send webhooks to the test's receiver on 127.0.0.1."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    running = start_server(db, free_port(), env, "--allow-private-webhooks")
    yield running
    if running.process.poll() is None:
        running.stop()


async def test_webhooks_from_the_cli(hooks_server: Server, receiver: Receiver) -> None:
    """webhooks add / deliveries / redeliver / remove, against a running server."""
    server = hooks_server
    admin = server.admin_token
    assert admin is not None

    async def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(remote, server, admin, *args)

    added = await cli("webhooks", "add", receiver.url, "--secret", "hook-secret-1")
    assert added.returncode == 0, added.stderr
    hook_id = added.stdout.split()[0]
    assert "secret: hook-secret-1" in added.stdout
    listed = await cli("webhooks", "list")
    assert hook_id in listed.stdout and "hook-secret-1" not in listed.stdout
    await cli("submit", "--tool", "t")
    await asyncio.wait_for(receiver.arrived.wait(), 20)
    _, body = receiver.received[0]
    assert json.loads(body)["type"] == "created"
    for _ in range(100):
        log = await cli("webhooks", "deliveries", "--status", "delivered")
        if "dlv_" in log.stdout:
            break
        await asyncio.sleep(0.1)
    delivery_id = next(w for w in log.stdout.split() if w.startswith("dlv_"))
    again = await cli("webhooks", "redeliver", delivery_id)
    assert again.returncode == 0 and "delivered" in again.stdout
    assert len(receiver.received) == 2
    assert (await cli("webhooks", "remove", hook_id)).returncode == 0
    assert (await cli("webhooks", "remove", hook_id)).returncode == 3
    bad = await cli("webhooks", "add", "not-a-url")
    assert bad.returncode == 3 and bad.stderr.startswith("error: ")
