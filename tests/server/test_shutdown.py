"""``signoff serve`` stops promptly on SIGTERM with live streams and waits open, losing nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from signoff.client import API, AsyncClient
from tests.serving import Server, agent_token, bearer, free_port, start_server
from tests.tui.tmux import Tmux

EXITS_WITHIN = 5.0
"""Seconds ``serve`` may take to exit after SIGTERM (its default --shutdown-timeout)."""


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[Server, int, dict[str, str]]]:
    """A real server, its port and environment (to start it again on the same database)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    port = free_port()
    running = start_server(f"sqlite:///{tmp_path / 'serve.db'}", port, env)
    yield running, port, env
    if running.process.poll() is None:
        running.process.kill()
        running.process.communicate()


async def ws_messages_until_closed(ws: ClientConnection) -> tuple[list[dict[str, Any]], int]:
    """Every message until the server closes the socket, and its close code."""
    seen: list[dict[str, Any]] = []
    try:
        while True:
            seen.append(json.loads(await ws.recv()))
    except ConnectionClosed as closed:
        return seen, closed.rcvd.code if closed.rcvd is not None else -1


async def sse_lines(stream: httpx.Response) -> list[str]:
    """Every line of an SSE stream until the server ends it."""
    return [line async for line in stream.aiter_lines()]


async def terminate(server: Server) -> float:
    """SIGTERM the server; seconds until its process exited."""
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        await asyncio.to_thread(server.process.wait, 15)
    elapsed = time.monotonic() - started
    if server.process.poll() is None:
        server.process.kill()
    server.process.communicate()
    return elapsed


def start_followers(server: Server, admin: str) -> tuple[Tmux | None, subprocess.Popen[str]]:
    """A terminal inbox under tmux (if tmux is here) and ``signoff watch``, both on ``server``."""
    remote = ["--server", server.base, "--token", admin]
    watch = subprocess.Popen(
        [sys.executable, "-m", "signoff", "watch", "--json", "--since", "0", *remote],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server.env,
    )
    if shutil.which("tmux") is None:
        return None, watch
    tmux = Tmux(f"signoff-test-{uuid.uuid4().hex[:8]}", "inbox")
    command = [sys.executable, "-m", "signoff", "inbox", *remote]
    subprocess.run(
        [
            "tmux",
            "-L",
            tmux.socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "inbox",
            "-x",
            "140",
            "-y",
            "40",
            *command,
        ],
        check=True,
        env={**server.env, "TERM": "xterm-256color"},
    )
    tmux.wait_for("0 pending")
    return tmux, watch


async def test_sigterm_with_streams_and_waits_open(
    serving: tuple[Server, int, dict[str, str]],
) -> None:
    """SIGTERM exits within 5 s: WS gets 1001, SSE ends, a wait gets 503; after a restart a
    client resuming from its last seq gets what happened meanwhile, a waiting Client wakes,
    and ``signoff watch`` and a terminal inbox kept running and caught up."""
    server, port, env = serving
    assert server.admin_token is not None
    admin = server.admin_token
    agent = agent_token(server)
    ws_url = server.base.replace("http", "ws") + f"{API}/ws"
    tmux, watch = await asyncio.to_thread(start_followers, server, admin)
    try:
        await stop_and_resume(server, port, env, admin, agent, ws_url, tmux, watch)
    finally:
        if tmux is not None:
            kill = ["tmux", "-L", tmux.socket, "kill-server"]
            await asyncio.to_thread(subprocess.run, kill, check=False)
        if watch.poll() is None:
            watch.kill()
        watch.communicate()


async def stop_and_resume(
    server: Server,
    port: int,
    env: dict[str, str],
    admin: str,
    agent: str,
    ws_url: str,
    tmux: Tmux | None,
    watch: subprocess.Popen[str],
) -> None:
    """The scenario: streams and waits open, SIGTERM, restart, a decision, everyone resumes."""
    async with (
        httpx.AsyncClient(base_url=server.base, timeout=30) as http,
        AsyncClient(server.base, agent) as waiting_client,
    ):
        created = await http.post(
            f"{API}/requests",
            json={"session_id": "s", "tool_name": "shell", "tool_args": {"command": "ls"}},
            headers=bearer(agent),
        )
        assert created.status_code == 201, created.text
        request_id = created.json()["id"]
        async with (
            connect(ws_url, additional_headers=bearer(admin)) as ws,
            http.stream("GET", f"{API}/events", headers=bearer(admin)) as stream,
        ):
            assert stream.status_code == 200
            ws_reader = asyncio.create_task(ws_messages_until_closed(ws))
            sse_reader = asyncio.create_task(sse_lines(stream))
            long_poll = asyncio.create_task(
                http.get(
                    f"{API}/requests/{request_id}/wait",
                    params={"timeout": 60},
                    headers=bearer(agent),
                )
            )
            client_wait = asyncio.create_task(waiting_client.wait(request_id, 60))
            # a write acknowledged just before the signal must survive it
            second = await http.post(
                f"{API}/requests",
                json={"session_id": "s", "tool_name": "shell", "tool_args": {"command": "pwd"}},
                headers=bearer(agent),
            )
            assert second.status_code == 201, second.text
            await asyncio.sleep(0.5)  # every stream and poll is open and waiting
            if tmux is not None:
                await asyncio.to_thread(tmux.wait_for, "2 pending", 30)
            # watch has reached the server (a server unreachable on its first try fails it at
            # once): a slow start on a busy machine must not meet the signal first
            assert watch.stdout is not None
            first_line = await asyncio.wait_for(asyncio.to_thread(watch.stdout.readline), 30)
            assert not (ws_reader.done() or sse_reader.done() or long_poll.done())

            elapsed = await terminate(server)
            assert elapsed < EXITS_WITHIN, f"serve took {elapsed:.1f} s to exit"

            seen, code = await asyncio.wait_for(ws_reader, 5)
            assert code == 1001
            lines = await asyncio.wait_for(sse_reader, 5)
            assert ": stream ended: the server is shutting down" in lines
            answer = await asyncio.wait_for(long_poll, 5)
            assert answer.status_code == 503
            assert answer.json()["error"] == "ServerStopping"
            assert set(answer.json()) == {"error", "detail"}
            assert answer.headers["retry-after"] == "1"
            assert not client_wait.done()  # the Client asks again instead of failing

        last_seq = max(m["seq"] for m in seen if m.get("type") != "heartbeat")
        restarted = start_server(server.db, port, env)
        try:
            assert restarted.admin_token is None  # the same database: its admin token is kept
            listed = await http.get(f"{API}/requests", headers=bearer(admin))
            ids = {r["id"] for r in listed.json()["items"]}
            assert {request_id, second.json()["id"]} <= ids
            approved = await http.post(
                f"{API}/requests/{request_id}/decision",
                json={"type": "approve"},
                headers=bearer(admin),
            )
            assert approved.status_code == 200, approved.text
            woken = await asyncio.wait_for(client_wait, 10)
            assert woken.status == "approved"
            if tmux is not None:  # the inbox reconnected and applied the decision
                await asyncio.to_thread(tmux.wait_for, "1 pending", 30)
            await asyncio.sleep(2)
            assert watch.poll() is None, f"signoff watch exited: {watch.communicate()[1]}"
            watch.terminate()
            printed, _ = await asyncio.to_thread(watch.communicate, timeout=10)
            lines = [first_line, *printed.splitlines()]
            watched = [json.loads(line) for line in lines if line.strip()]
            assert ("decided", request_id) in {(e["type"], e["request"]["id"]) for e in watched}
            assert len({e["seq"] for e in watched}) == len(watched)  # nothing twice
            async with connect(
                f"{ws_url}?since={last_seq}", additional_headers=bearer(admin)
            ) as resumed:
                replayed: list[dict[str, Any]] = []
                while not any(m.get("type") == "decided" for m in replayed):
                    replayed.append(json.loads(await asyncio.wait_for(resumed.recv(), 5)))
            assert all(m["seq"] > last_seq for m in replayed if "seq" in m)
            decided = next(m for m in replayed if m["type"] == "decided")
            assert decided["request"]["id"] == request_id
        finally:
            with contextlib.suppress(ProcessLookupError):
                restarted.process.kill()
            restarted.process.communicate()
