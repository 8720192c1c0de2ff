"""A stand-in for an ``opencode serve`` permission API, and a bridge run against it.

It speaks the shapes :mod:`signoff.integrations.opencode` documents (OpenCode 1.x):
``GET /event`` (SSE of ``{type, properties}``), ``GET /permission``, and
``POST /permission/{id}/reply`` with ``{reply, message?}``, which it records; a reply or
:meth:`OpenCodeStandIn.answer_itself` publishes ``permission.replied``. With a password,
every route wants HTTP basic auth, as OpenCode does with ``OPENCODE_SERVER_PASSWORD``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.serving import Server, agent_token, bearer, free_port, start_server

SIGNOFF = str(Path(sys.executable).with_name("signoff"))


def permission(
    permission_id: str,
    session_id: str,
    kind: str = "bash",
    patterns: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``permission.asked`` payload as OpenCode sends it."""
    return {
        "id": permission_id,
        "sessionID": session_id,
        "permission": kind,
        "patterns": patterns if patterns is not None else ["git push origin main"],
        "metadata": metadata if metadata is not None else {},
        "always": ["git push *"],
        "tool": {"messageID": "msg_01", "callID": f"call_{permission_id}"},
    }


@dataclass
class OpenCodeStandIn:
    """What the stand-in holds: pending permissions, replies received, live streams."""

    url: str
    password: str | None = None
    legacy: bool = False
    """Speak as OpenCode before the permission API: ``permission.updated`` events, no list,
    replies only on ``POST /session/{sessionID}/permissions/{permissionID}``."""
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    replies: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    streams: list[asyncio.Queue[str]] = field(default_factory=list)
    followed: asyncio.Event = field(default_factory=asyncio.Event)
    uvicorn: uvicorn.Server | None = None
    serving: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        """Go away, as a stopped or restarted OpenCode does (its pending permissions too)."""
        if self.uvicorn is None or self.serving is None:
            return
        self.uvicorn.should_exit = self.uvicorn.force_exit = True
        for queue in self.streams:
            queue.put_nowait("")  # ends the stream, as a process that exits closes it
        with contextlib.suppress(asyncio.CancelledError):
            await self.serving
        self.uvicorn = self.serving = None

    def publish(self, kind: str, properties: dict[str, Any]) -> None:
        """Send one event to every connected stream."""
        data = json.dumps({"type": kind, "properties": properties})
        for queue in self.streams:
            queue.put_nowait(data)

    def ask(self, payload: dict[str, Any]) -> None:
        """OpenCode asks for a permission."""
        self.pending[payload["id"]] = payload
        if not self.legacy:
            self.publish("permission.asked", payload)
            return
        self.publish(
            "permission.updated",
            {
                "id": payload["id"],
                "type": payload["permission"],
                "pattern": payload["patterns"],
                "sessionID": payload["sessionID"],
                "messageID": "msg_01",
                "callID": payload["tool"]["callID"],
                "title": f"Run {' '.join(payload['patterns'])}",
                "metadata": payload["metadata"],
                "time": {"created": 1},
            },
        )

    def answer_itself(self, permission_id: str, reply: str) -> None:
        """Someone answered in OpenCode's own UI."""
        payload = self.pending.pop(permission_id)
        self._replied(payload["sessionID"], permission_id, reply)

    def _replied(self, session_id: str, permission_id: str, reply: str) -> None:
        if self.legacy:
            body = {"sessionID": session_id, "permissionID": permission_id, "response": reply}
        else:
            body = {"sessionID": session_id, "requestID": permission_id, "reply": reply}
        self.publish("permission.replied", body)

    async def reply_to(self, permission_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The first reply the bridge sent for ``permission_id`` (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for rid, body in self.replies:
                if rid == permission_id:
                    return body
            await asyncio.sleep(0.05)
        raise AssertionError(f"no reply for {permission_id}; got {self.replies}")

    async def connected(self, timeout: float = 30.0) -> None:
        """Wait until a bridge follows the event stream."""
        try:
            await asyncio.wait_for(self.followed.wait(), timeout)
        except TimeoutError:
            raise AssertionError("the bridge never connected to /event") from None

    def _authorized(self, request: Request) -> bool:
        if self.password is None:
            return True
        expected = base64.b64encode(f"opencode:{self.password}".encode()).decode()
        return request.headers.get("authorization") == f"Basic {expected}"

    def app(self) -> Starlette:
        """The ASGI app."""

        async def events(request: Request) -> Response:
            if not self._authorized(request):
                return Response("unauthorized", status_code=401)
            queue: asyncio.Queue[str] = asyncio.Queue()
            queue.put_nowait(json.dumps({"type": "server.connected", "properties": {}}))
            self.streams.append(queue)
            self.followed.set()

            async def body() -> AsyncIterator[str]:
                try:
                    while data := await queue.get():
                        yield f"data: {data}\n\n"
                finally:
                    self.streams.remove(queue)

            return StreamingResponse(body(), media_type="text/event-stream")

        async def listing(request: Request) -> Response:
            if not self._authorized(request):
                return Response("unauthorized", status_code=401)
            return JSONResponse(list(self.pending.values()))

        async def reply(request: Request) -> Response:
            if not self._authorized(request):
                return Response("unauthorized", status_code=401)
            permission_id = request.path_params["permission_id"]
            body = await request.json()
            self.replies.append((permission_id, body))
            asked = self.pending.pop(permission_id, None)
            if asked is not None:
                self._replied(
                    asked["sessionID"], permission_id, body.get("reply", body.get("response"))
                )
            return JSONResponse(True)

        if self.legacy:
            routes = [
                Route("/session/{session_id}/permissions/{permission_id}", reply, methods=["POST"])
            ]
        else:
            routes = [
                Route("/permission", listing),
                Route("/permission/{permission_id}/reply", reply, methods=["POST"]),
            ]
        return Starlette(routes=[Route("/event", events), *routes])


def serve_signoff(home: Path) -> Iterator[tuple[Server, str]]:
    """A real ``signoff serve`` on a SQLite file in ``home`` and an agent token on it, for a
    module fixture to yield from; the server is stopped when the fixture ends."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "COLUMNS": "200"}
    running = start_server(f"sqlite:///{home / 'serve.db'}", free_port(), env)
    yield running, agent_token(running, "opencode")
    running.stop()


@contextlib.asynccontextmanager
async def run_standin(
    password: str | None = None, port: int | None = None, *, legacy: bool = False
) -> AsyncIterator[OpenCodeStandIn]:
    """The stand-in served by uvicorn on ``port`` (default: a free one) in this event loop."""
    port = port or free_port()
    state = OpenCodeStandIn(url=f"http://127.0.0.1:{port}", password=password, legacy=legacy)
    server = uvicorn.Server(
        uvicorn.Config(state.app(), port=port, log_level="warning", lifespan="off")
    )
    state.serving = asyncio.create_task(server.serve())
    state.uvicorn = server
    for _ in range(1000):  # uvicorn offers no event for "listening"
        if server.started:
            break
        await asyncio.sleep(0.01)
    try:
        yield state
    finally:
        await state.stop()


@contextlib.asynccontextmanager
async def run_bridge(
    standin: OpenCodeStandIn, server: Server, token: str, *extra: str
) -> AsyncIterator[subprocess.Popen[str]]:
    """``signoff bridge opencode`` as a real process, connected to the stand-in."""
    env = {**server.env, "SIGNOFF_TOKEN": token}
    if standin.password:
        env["OPENCODE_SERVER_PASSWORD"] = standin.password
    process = subprocess.Popen(  # noqa: ASYNC220 - started once; the test then awaits only
        [SIGNOFF, "bridge", "opencode", "--url", standin.url, "--server", server.base, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        await standin.connected()
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
        await asyncio.to_thread(process.communicate, timeout=20)


async def filed(server: Server, session_id: str, count: int = 1) -> list[dict[str, Any]]:
    """The signoff requests filed for ``session_id``, once there are ``count`` (oldest first)."""
    assert server.admin_token is not None
    deadline = time.monotonic() + 30
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(server.admin_token)) as c:
        while time.monotonic() < deadline:
            page = await c.get("/api/v1/requests", params={"session_id": session_id})
            items: list[dict[str, Any]] = page.json()["items"]
            if len(items) >= count:
                return list(reversed(items))
            await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} requests filed for {session_id}")


async def settled(server: Server, request_id: str) -> dict[str, Any]:
    """A request once it has left pending."""
    assert server.admin_token is not None
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(server.admin_token)) as c:
        response = await c.get(f"/api/v1/requests/{request_id}/wait", params={"timeout": 30})
        body: dict[str, Any] = response.json()
        return body


async def decide(server: Server, request_id: str, body: dict[str, Any]) -> httpx.Response:
    """A person's decision, through the HTTP API."""
    assert server.admin_token is not None
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(server.admin_token)) as c:
        return await c.post(f"/api/v1/requests/{request_id}/decision", json=body)


def unique(prefix: str) -> str:
    """An id no other test uses."""
    return f"{prefix}_{os.urandom(6).hex()}"
