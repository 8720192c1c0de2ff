"""Notification routes end to end: ``signoff notify`` and ``signoff people`` against a real
``signoff serve``, a webhook route sending to a local HTTP receiver, a failing route shown
in ``notify list`` and to the inbox."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from signoff.server.app import API
from tests.serving import (
    Server,
    agent_token,
    bearer,
    free_port,
    new_token,
    run_receiver,
    start_server,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module that allows private webhook targets (the local receiver)."""
    home = tmp_path_factory.mktemp("notify")
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "COLUMNS": "250"}
    running = start_server(
        f"sqlite:///{home / 'serve.db'}", free_port(), env, "--allow-private-webhooks"
    )
    yield running
    if running.process.poll() is None:
        running.stop()


def cli(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    """A ``signoff`` command against the server over HTTP, as its admin."""
    assert server.admin_token is not None
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            *args,
            "--server",
            server.base,
            "--token",
            server.admin_token,
        ],
        capture_output=True,
        text=True,
        env=server.env,
        timeout=60,
        check=False,
    )


async def submit(server: Server, token: str, tool: str) -> str:
    """A new request from the agent; its id."""
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(token)) as http:
        made = await http.post(
            f"{API}/requests", json={"session_id": "s", "tool_name": tool, "tool_args": {"n": 1}}
        )
        assert made.status_code in (200, 201), made.text
        request_id: str = made.json()["id"]
        return request_id


async def test_a_webhook_route_sends_and_a_failing_one_shows(served: Server) -> None:
    """A route added with the CLI receives its requests; a route whose receiver fails is
    FAILING in ``notify list`` (exit 1) and in the inbox's failing list; removal stops it."""
    agent = agent_token(served, "deployer")
    async with run_receiver() as good, run_receiver() as bad:
        bad.fail_next = 1000
        added = cli(served, "notify", "add", "deploys", "--webhook", good.url, "--tool", "deploy*")
        assert added.returncode == 0, added.stderr
        assert "deploys: webhook" in added.stdout
        added = cli(served, "notify", "add", "broken", "--webhook", bad.url, "--tool", "shell")
        assert added.returncode == 0, added.stderr
        request_id = await submit(served, agent, "deploy_app")
        await asyncio.wait_for(good.arrived.wait(), 20)
        body = json.loads(good.received[0][1])
        assert (body["type"], body["route"], body["request"]["id"]) == (
            "new",
            "deploys",
            request_id,
        )
        await submit(served, agent, "shell")
        listed = cli(served, "notify", "list")
        for _ in range(100):
            if "FAILING" in listed.stdout:
                break
            await asyncio.sleep(0.1)
            listed = cli(served, "notify", "list")
        assert listed.returncode == 1, listed.stdout
        broken = next(line for line in listed.stdout.splitlines() if line.startswith("broken"))
        assert "FAILING: HTTP 500" in broken
        deploys = next(line for line in listed.stdout.splitlines() if line.startswith("deploys"))
        assert "ok" in deploys and "never" not in deploys
        assert served.admin_token is not None
        async with httpx.AsyncClient(
            base_url=served.base, headers=bearer(served.admin_token)
        ) as http:
            failing = (await http.get(f"{API}/notify/failing")).json()["items"]
        assert [f["name"] for f in failing] == ["broken"] and "HTTP 500" in failing[0]["error"]
        removed = cli(served, "notify", "remove", "broken")
        assert removed.returncode == 0 and "broken: removed" in removed.stdout
        assert cli(served, "notify", "list").returncode == 0


def test_people_link_list_unlink(served: Server) -> None:
    """``signoff people`` links a Slack id and an address to a person, lists and unlinks."""
    new_token(served, "alice", "approver")
    linked = cli(served, "people", "link", "U0ALICE", "alice")
    assert linked.returncode == 0 and "slack U0ALICE -> alice" in linked.stdout, linked.stderr
    linked = cli(served, "people", "link", "Alice@Example.com", "alice")
    assert "email alice@example.com -> alice" in linked.stdout, linked.stderr
    refused = cli(served, "people", "link", "U0GHOST", "ghost")
    assert refused.returncode != 0 and "ghost" in refused.stderr
    listed = cli(served, "people", "list")
    assert "U0ALICE" in listed.stdout and "alice@example.com" in listed.stdout
    assert cli(served, "people", "unlink", "U0ALICE").returncode == 0
    assert "U0ALICE" not in cli(served, "people", "list").stdout


def test_tools_toml_routes_are_listed(tmp_path: Path) -> None:
    """A [[notify]] route in the server's tools.toml is listed as read-only from tools.toml."""
    (tmp_path / ".signoff").mkdir()
    (tmp_path / ".signoff" / "tools.toml").write_text(
        '[[notify]]\nname = "oncall"\nchannel = { type = "email", to = ["ops@example.com"] }\n'
    )
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "250"}
    running = start_server(
        f"sqlite:///{tmp_path / 'serve.db'}", free_port(), env, cwd=str(tmp_path)
    )
    try:
        listed = cli(running, "notify", "list")
        line = next(line for line in listed.stdout.splitlines() if line.startswith("oncall"))
        assert "tools.toml" in line and "email ops@example.com" in line
        refused = cli(running, "notify", "remove", "oncall")
        assert refused.returncode != 0 and "tools.toml" in refused.stderr
    finally:
        running.stop()
