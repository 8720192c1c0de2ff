"""Slow clients against a real server: heads and bodies sent slowly are cut, sockets are capped."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, free_port, start_server

CAP = 50


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[Server]:
    """A server with a 1 s head and body deadline and at most 50 open connections."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    server = start_server(
        f"sqlite:///{tmp_path / 'serve.db'}",
        free_port(),
        env,
        "--header-timeout",
        "1",
        "--body-timeout",
        "1",
        "--max-connections",
        str(CAP),
    )
    yield server
    if server.process.poll() is None:
        server.stop()


def open_partial_heads(server: Server, count: int) -> list[socket.socket]:
    """``count`` sockets that each sent the start of a request head and nothing more."""
    sockets = []
    for _ in range(count):
        sock = server.connect()
        sock.sendall(b"GET /api/v1/requests HTTP/1.1\r\nHost: x\r\n")
        sockets.append(sock)
    return sockets


def read_until_closed(sock: socket.socket, deadline: float) -> bytes | None:
    """What the server sent before closing ``sock``; None if still open at ``deadline``."""
    data = b""
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def test_two_hundred_slow_request_heads_are_closed_within_seconds(strict: Server) -> None:
    """200 sockets dribbling a request head are all closed (408) a few seconds later."""
    sockets = open_partial_heads(strict, 200)
    try:
        for _ in range(3):  # a byte now and then does not buy more time
            time.sleep(0.2)
            for sock in sockets:
                with contextlib.suppress(OSError):  # already closed by the server
                    sock.sendall(b"X")
        deadline = time.monotonic() + 5
        answers = [read_until_closed(sock, deadline) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
    assert all(answer is not None for answer in answers), "some slow sockets are still open"
    timed_out = [a for a in answers if a is not None and a.startswith(b"HTTP/1.1 408")]
    assert timed_out, answers[:3]
    body = json.loads(timed_out[0].split(b"\r\n\r\n", 1)[1])
    assert body["error"] == "RequestTimeout" and set(body) == {"error", "detail"}
    assert httpx.get(f"{strict.base}/healthz", timeout=5).status_code == 200


def test_a_body_sent_slowly_is_cut_with_408(strict: Server) -> None:
    """A body dribbled a byte at a time is answered 408 and the socket closed; nothing is filed."""
    token = agent_token(strict)
    head = (
        f"POST {API}/requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{"
    )
    started = time.monotonic()
    with strict.connect() as sock:
        sock.sendall(head.encode())
        try:
            for _ in range(30):
                time.sleep(0.2)
                sock.sendall(b" ")
        except OSError:
            pass  # the server closed it: what this test wants
        answer = read_until_closed(sock, time.monotonic() + 5)
    assert answer is not None, "the slow body's socket is still open"
    assert time.monotonic() - started < 5
    assert answer.startswith(b"HTTP/1.1 408"), answer
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"] == "RequestTimeout" and set(body) == {"error", "detail"}
    listed = httpx.get(f"{strict.base}{API}/requests", headers=bearer(token), timeout=5)
    assert listed.json()["items"] == []


def test_over_the_cap_new_connections_get_503_until_slow_ones_are_dropped(strict: Server) -> None:
    """With the cap held by slow sockets, a new client gets 503 ServerBusy; once cut, 200."""
    sockets = open_partial_heads(strict, CAP + 10)
    try:
        busy = httpx.get(f"{strict.base}/healthz", timeout=5)
        assert busy.status_code == 503, busy.text
        assert busy.json() == {
            "error": "ServerBusy",
            "detail": "the server has as many connections open as it may",
        }
        deadline = time.monotonic() + 5
        for sock in sockets:
            assert read_until_closed(sock, deadline) is not None
    finally:
        for sock in sockets:
            sock.close()
    assert httpx.get(f"{strict.base}/healthz", timeout=5).status_code == 200


def test_long_poll_and_event_stream_outlive_the_read_timeouts(strict: Server) -> None:
    """The deadlines concern reading a request: a 3 s long poll and an SSE stream are not cut."""
    token = agent_token(strict)
    created = httpx.post(
        f"{strict.base}{API}/requests",
        json={"session_id": "s", "tool_name": "t"},
        headers=bearer(token),
        timeout=5,
    )
    request_id = created.json()["id"]
    started = time.monotonic()
    waited = httpx.get(
        f"{strict.base}{API}/requests/{request_id}/wait",
        params={"timeout": 3},
        headers=bearer(token),
        timeout=10,
    )
    assert waited.status_code == 200 and waited.json()["status"] == "pending"
    assert time.monotonic() - started >= 2.9
    created_seen = 0
    with httpx.stream(
        "GET", f"{strict.base}{API}/events?since=0", headers=bearer(token), timeout=10
    ) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: created"):
                created_seen += 1
                if created_seen == 2:
                    break
                time.sleep(2.5)  # the stream idles past both deadlines, then gets an event
                later = httpx.post(
                    f"{strict.base}{API}/requests",
                    json={"session_id": "s", "tool_name": "later"},
                    headers=bearer(token),
                    timeout=5,
                )
                assert later.status_code == 201
    assert created_seen == 2
