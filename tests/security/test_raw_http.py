"""Raw HTTP/1.1 against a real server: smuggling, injected header bytes, oversized heads.

``signoff serve`` parses requests with uvicorn's httptools protocol (llhttp) under the
guard of server/sockets.py. Whatever bytes an agent sends, a malformed or ambiguous head is
answered 400 and its connection closed before the app sees it, a head may not grow past
``MAX_HEAD`` however it is sent, and the server goes on answering everyone else.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from signoff.server.app import API
from signoff.server.sockets import MAX_HEAD
from tests.serving import Server, agent_token, bearer, serve_for_module


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module: every attack here leaves it as it was."""
    yield from serve_for_module(tmp_path_factory.mktemp("raw-http"))


@pytest.fixture(scope="module")
def agent(server: Server) -> str:
    """An agent's token."""
    return agent_token(server, "raw-agent")


def exchange(server: Server, raw: bytes, wait: float = 3.0) -> tuple[bytes, bool]:
    """Send ``raw`` on a new connection; what came back within ``wait`` seconds, and whether
    the server closed the connection."""
    with server.connect(wait) as sock:
        sock.sendall(raw)
        return rest_of(sock, wait)


def stream_head(sock: socket.socket, start: bytes, total: int) -> None:
    """Send ``start``, then ``total`` bytes of one header's value, 4 KB at a time, for as
    long as the server takes them."""
    sock.sendall(start)
    sent = 0
    try:
        while sent < total:
            sock.sendall(b"a" * 4096)
            sent += 4096
    except (BrokenPipeError, ConnectionResetError, TimeoutError):
        pass


def rest_of(sock: socket.socket, wait: float = 10.0) -> tuple[bytes, bool]:
    """What the server sends on ``sock`` within ``wait`` seconds, and whether it closed the
    connection (an end of stream, or a reset: a server closing with unread bytes resets)."""
    data, deadline = b"", time.monotonic() + wait
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def statuses(answer: bytes) -> list[int]:
    """The status of each response in ``answer``, in order."""
    return [
        int(answer[i + 9 : i + 12])
        for i in range(len(answer))
        if answer.startswith(b"HTTP/1.1 ", i)
    ]


def still_serving(server: Server) -> None:
    assert httpx.get(f"{server.base}/healthz", timeout=10).json() == {"ok": True}


def filed(server: Server, agent: str, session: str) -> list[object]:
    """The agent's requests in ``session``."""
    page = httpx.get(
        f"{server.base}{API}/requests",
        params={"session_id": session},
        headers=bearer(agent),
        timeout=10,
    )
    assert page.status_code == 200, page.text
    items: list[object] = page.json()["items"]
    return items


def test_a_request_smuggled_behind_conflicting_lengths_is_never_run(
    server: Server, agent: str
) -> None:
    """Content-Length and Transfer-Encoding together: 400 and closed; the request hidden in
    the body is not read as a second one, so nothing is filed."""
    smuggled = json.dumps({"session_id": "smuggled", "tool_name": "shell", "tool_args": {}})
    inner = (
        f"POST {API}/requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {agent}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(smuggled)}\r\n\r\n{smuggled}"
    ).encode()
    body = b"0\r\n\r\n" + inner
    outer = (
        f"POST {API}/requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {agent}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    answer, closed = exchange(server, outer + body)
    assert statuses(answer) == [400] and closed
    assert filed(server, agent, "smuggled") == []
    still_serving(server)


@pytest.mark.parametrize(
    "head",
    [
        b"Host: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        b"Host : x\r\n\r\n",
        b"Host: x\r\nX-Forwarded-For: a\rb\r\n\r\n",
        b"Host: x\r\nX-Note: a\x00b\r\n\r\n",
        b"Host: x\r\nX-Note: a\r\n folded\r\n\r\n",
        b"Host: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
    ids=["two-lengths", "space-before-colon", "bare-cr", "nul", "obs-fold", "bad-chunk"],
)
def test_a_malformed_head_is_refused_before_the_app(
    server: Server, agent: str, head: bytes
) -> None:
    """Each is answered 400 by the parser (its plain-text answer, not the app's JSON) and
    its connection closed."""
    raw = f"POST {API}/requests HTTP/1.1\r\nAuthorization: Bearer {agent}\r\n".encode() + head
    answer, closed = exchange(server, raw)
    assert statuses(answer) == [400] and closed
    assert b"application/json" not in answer
    still_serving(server)


def test_a_head_over_the_limit_is_refused_at_once_or_in_pieces(server: Server) -> None:
    """A head larger than MAX_HEAD is answered 400 InvalidHeader whether it arrives whole
    or a piece at a time; the piecemeal one is cut soon after it passes the limit."""
    whole = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (MAX_HEAD + 10) + b"\r\n\r\n"
    answer, closed = exchange(server, whole)
    assert statuses(answer) == [400] and closed
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"] == "InvalidHeader"

    with server.connect() as sock:
        stream_head(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", 16 * MAX_HEAD)
        answer, closed = rest_of(sock)
    # cut: a 400 (or, with unread bytes left, a reset before it is read), never left open
    assert closed and statuses(answer) in ([], [400])
    still_serving(server)


def test_a_large_body_is_not_taken_for_a_large_head(server: Server, agent: str) -> None:
    """A body larger than MAX_HEAD sent with its head in one write is read as a body:
    the request is filed."""
    body = json.dumps(
        {"session_id": "big-body", "tool_name": "shell", "tool_args": {"x": "b" * 2 * MAX_HEAD}}
    ).encode()
    head = (
        f"POST {API}/requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {agent}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    answer, _ = exchange(server, head + body, wait=2.0)
    assert statuses(answer) == [201]
    assert len(filed(server, agent, "big-body")) == 1


def test_a_head_under_the_limit_and_pipelined_requests_are_answered_in_order(
    server: Server, agent: str
) -> None:
    """Two requests sent back to back on one connection get their two answers, in order."""
    auth = f"Authorization: Bearer {agent}\r\n".encode()
    first = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 20_000 + b"\r\n\r\n"
    second = f"GET {API}/requests/req_unknown HTTP/1.1\r\nHost: x\r\n".encode() + auth + b"\r\n"
    answer, _ = exchange(server, first + second, wait=2.0)
    assert statuses(answer) == [200, 404]


def test_a_head_streamed_behind_a_waiting_long_poll_is_cut(server: Server, agent: str) -> None:
    """While a long poll waits on a connection, a next head sent behind it is held to the
    same limit (it is not buffered without bound until the poll ends)."""
    made = httpx.post(
        f"{server.base}{API}/requests",
        json={"session_id": "poll", "tool_name": "shell", "tool_args": {}},
        headers=bearer(agent),
        timeout=10,
    )
    assert made.status_code == 201, made.text
    poll = (
        f"GET {API}/requests/{made.json()['id']}/wait?timeout=20 HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {agent}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with server.connect() as sock:
        stream_head(sock, poll + b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", 16 * MAX_HEAD)
        answer, closed = rest_of(sock)
    assert closed and statuses(answer) in ([], [400])
    assert time.monotonic() - started < 15  # cut long before the poll's 20 s
    still_serving(server)


def test_garbage_instead_of_http_is_a_400_and_no_traceback(server: Server) -> None:
    """A TLS hello or random bytes on the plain-HTTP port: 400, closed, server unharmed."""
    answer, closed = exchange(server, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"A" * 64)
    assert statuses(answer) == [400] and closed
    still_serving(server)
