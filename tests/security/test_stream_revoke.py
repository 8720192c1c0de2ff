"""Attack: an agent keeps a live event stream open after its token was revoked."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from signoff.server.app import API
from tests.serving import Server, bearer, new_token

ENDS_WITHIN = 2.5
"""Seconds a stream may outlive the revoke (re-checked every 0.5 s, plus a process's lag)."""


async def ws_close_code(ws: ClientConnection, within: float) -> int | None:
    """Read until the server closes the socket; its close code, or None if it stayed open."""
    deadline = time.monotonic() + within
    try:
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.wait_for(ws.recv(), left)
    except TimeoutError:
        return None
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd is not None else -1
    return None


async def drain(stream: httpx.Response) -> None:
    """Read an SSE stream until the server ends it."""
    async for _ in stream.aiter_lines():
        pass


async def ended_within(reader: asyncio.Task[None], within: float) -> bool:
    """Whether ``reader`` finishes (the server ended its stream) within ``within`` seconds."""
    done, _ = await asyncio.wait([reader], timeout=within)
    return bool(done)


async def open_streams_then_revoke(
    watched: Server, token: str, revoke: asyncio.Future[None]
) -> tuple[int | None, bool]:
    """Open a WebSocket and an SSE stream on ``watched``; wait for ``revoke``; how each ended."""
    ws_url = watched.base.replace("http", "ws") + f"{API}/ws"
    async with (
        connect(ws_url, additional_headers=bearer(token)) as ws,
        httpx.AsyncClient(base_url=watched.base, timeout=30) as http,
        http.stream("GET", f"{API}/events", headers=bearer(token)) as stream,
    ):
        assert stream.status_code == 200
        reader = asyncio.create_task(drain(stream))
        try:
            # both streams are live: neither has ended before the revoke
            assert await ws_close_code(ws, 0.8) is None
            assert not reader.done()
            await revoke
            code, ended = await asyncio.gather(
                ws_close_code(ws, ENDS_WITHIN), ended_within(reader, ENDS_WITHIN)
            )
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        return code, ended


async def test_revoking_a_token_ends_its_websocket_and_sse_streams(server: Server) -> None:
    """`signoff token revoke` closes the token's open WebSocket (4401) and ends its SSE stream."""
    token, token_id = new_token(server, "bot", "agent")
    revoked: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def revoke() -> None:
        await asyncio.sleep(1.2)  # after both streams are open and seen live
        done = await asyncio.to_thread(server.cli, "token", "revoke", token_id)
        assert done.returncode == 0, done.stderr
        revoked.set_result(None)

    task = asyncio.create_task(revoke())
    code, ended = await open_streams_then_revoke(server, token, revoked)
    await task
    assert code == 4401
    assert ended
    async with httpx.AsyncClient(base_url=server.base) as http:  # and it opens nothing new
        assert (await http.get(f"{API}/events", headers=bearer(token))).status_code == 401


async def test_an_inbox_session_stream_ends_when_its_token_is_revoked(server: Server) -> None:
    """A WebSocket signed in by the inbox cookie is closed with 4401 once its token is revoked."""
    token, token_id = new_token(server, "carol", "approver")
    async with httpx.AsyncClient(base_url=server.base) as http:
        signed_in = await http.post("/login", data={"token": token, "next": "/"})
    assert signed_in.status_code < 400, signed_in.text
    # taken from Set-Cookie itself: a Secure cookie would not go back over http from a jar
    cookie = "; ".join(c.split(";", 1)[0] for c in signed_in.headers.get_list("set-cookie"))
    assert cookie
    ws_url = server.base.replace("http", "ws") + f"{API}/ws"
    async with connect(ws_url, additional_headers={"Cookie": cookie}) as ws:
        assert await ws_close_code(ws, 0.8) is None
        done = await asyncio.to_thread(server.cli, "token", "revoke", token_id)
        assert done.returncode == 0, done.stderr
        assert await ws_close_code(ws, ENDS_WITHIN) == 4401


async def test_signing_out_ends_the_inbox_session_stream(server: Server) -> None:
    """Signing out of the inbox closes the WebSocket that session opened, with 4401."""
    token, _ = new_token(server, "dana", "approver")
    async with httpx.AsyncClient(base_url=server.base) as http:
        signed_in = await http.post("/login", data={"token": token, "next": "/"})
        cookie = "; ".join(c.split(";", 1)[0] for c in signed_in.headers.get_list("set-cookie"))
        page = await http.get("/", headers={"Cookie": cookie})
        found = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert found is not None, page.text
        ws_url = server.base.replace("http", "ws") + f"{API}/ws"
        async with connect(ws_url, additional_headers={"Cookie": cookie}) as ws:
            assert await ws_close_code(ws, 0.8) is None
            out = await http.post(
                "/logout", data={"csrf": found.group(1)}, headers={"Cookie": cookie}
            )
            assert out.status_code == 303, out.text
            assert await ws_close_code(ws, ENDS_WITHIN) == 4401


async def test_a_revoke_on_one_node_ends_streams_on_another(
    two_nodes: tuple[Server, Server],
) -> None:
    """A token revoked through node A's API ends its WebSocket and SSE streams on node B."""
    a, b = two_nodes
    admin = a.admin_token
    assert admin is not None
    async with httpx.AsyncClient(base_url=a.base, headers=bearer(admin), timeout=30) as http:
        made = await http.post(f"{API}/tokens", json={"name": "bot", "role": "agent"})
        assert made.status_code == 201, made.text
        token, token_id = made.json()["token"], made.json()["id"]
        revoked: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def revoke() -> None:
            await asyncio.sleep(1.2)
            done = await http.post(f"{API}/tokens/{token_id}/revoke")
            assert done.status_code == 200, done.text
            revoked.set_result(None)

        task = asyncio.create_task(revoke())
        code, ended = await open_streams_then_revoke(b, token, revoked)
        await task
    assert code == 4401
    assert ended
