"""End to end against a real ``signoff serve`` process on a free port."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, free_port, start_server


async def test_first_start_prints_an_admin_token_and_later_starts_do_not(
    server: Server, tmp_path: Path
) -> None:
    """The admin token works once printed; a restart prints how to make another instead."""
    assert server.admin_token is not None and server.admin_token.startswith("so_")
    async with httpx.AsyncClient(base_url=server.base) as http:
        me = await http.get(f"{API}/me", headers=bearer(server.admin_token))
        assert me.json() == {"name": "admin", "role": "admin"}
    server.stop()
    again = start_server(server.db, free_port(), server.env)
    try:
        assert again.admin_token is None
    finally:
        again.stop()


async def test_agent_waits_while_a_person_decides_elsewhere(server: Server) -> None:
    """An agent long-polls over HTTP; an approval from the CLI (another process) wakes it."""
    token = agent_token(server)
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(token), timeout=30) as http:
        created = await http.post(
            f"{API}/requests",
            json={"session_id": "e2e", "tool_name": "shell", "tool_args": {"command": "ls"}},
        )
        assert created.status_code == 201
        request_id = created.json()["id"]
        waiting = asyncio.create_task(http.get(f"{API}/requests/{request_id}/wait?timeout=20"))
        await asyncio.sleep(0.3)
        approve = await asyncio.to_thread(server.cli, "approve", request_id)
        assert approve.returncode == 0, approve.stderr
        waited = await waiting
        assert waited.json()["status"] == "approved"


async def test_websocket_and_sse_deliver_and_replay_across_a_restart(server: Server) -> None:
    """Live events arrive over WebSocket; after a restart `since` replays what was missed."""
    assert server.admin_token is not None
    token = agent_token(server)
    ws_url = server.base.replace("http", "ws") + f"{API}/ws"
    headers = bearer(server.admin_token)
    received: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(token), timeout=30) as http:
        async with connect(ws_url, additional_headers=headers) as ws:
            await http.post(f"{API}/requests", json={"session_id": "w", "tool_name": "t"})
            while not received:
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if message["type"] != "heartbeat":
                    received.append(message)
        assert received[0]["type"] == "created"
        last_seq = received[0]["seq"]
        created = await http.post(f"{API}/requests", json={"session_id": "w", "tool_name": "t2"})
        missed_id = created.json()["id"]
    port = server.port
    server.stop()
    restarted = start_server(server.db, port, server.env)
    try:
        async with connect(f"{ws_url}?since={last_seq}", additional_headers=headers) as ws:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert message["type"] == "created" and message["request"]["id"] == missed_id
        async with (
            httpx.AsyncClient(base_url=restarted.base, headers=headers, timeout=30) as http,
            http.stream("GET", f"{API}/events", headers={"Last-Event-ID": "0"}) as stream,
        ):
            seen: list[str] = []
            async for line in stream.aiter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:])["request"]["tool_name"])
                if len(seen) == 2:
                    break
        assert seen == ["t", "t2"]
    finally:
        restarted.stop()


def test_port_in_use_is_one_line(server: Server) -> None:
    """A second server on a busy port fails with one error line, not a traceback."""
    port = str(server.port)
    done = subprocess.run(
        [sys.executable, "-m", "signoff", "serve", "--port", port, "--db", server.db],
        capture_output=True,
        text=True,
        env=server.env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr.startswith("error: cannot listen on") and "Traceback" not in done.stderr
