"""Input limits that hold before any handler runs: body size, body read time, NUL in the URL."""

from __future__ import annotations

import asyncio
import json
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from signoff.errors import PayloadTooLarge, RequestTimeout, SignoffError
from signoff.server.errors import error_body, status_of

__all__ = ["BodyLimit", "NoNulInUrl"]


class BodyLimit:
    """Refuse request bodies over ``max_body`` bytes with 413, declared or streamed.

    With ``body_timeout``, a body that has not fully arrived that many seconds after the
    handler first asks for it is cut with 408 (a client dribbling a byte at a time no longer
    holds a handler). Only reading the request is timed: once the body is in, the handler
    may take as long as it needs (long-poll waits, event streams).
    """

    def __init__(self, app: ASGIApp, *, max_body: int, body_timeout: float | None = None) -> None:
        self.app = app
        self.max_body = max_body
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = self.max_body + 1
                if declared > self.max_body:
                    await refuse(send, self._too_large())
                    return
        seen = 0
        body_done = False
        deadline: float | None = None
        stopped: SignoffError | None = None
        answered = False

        async def limited_receive() -> Message:
            nonlocal seen, body_done, deadline, stopped
            if stopped is not None:
                raise stopped
            if body_done or self.body_timeout is None:
                message = await receive()
            else:
                if deadline is None:
                    deadline = time.monotonic() + self.body_timeout
                try:
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        message = await receive()
                except TimeoutError:
                    stopped = RequestTimeout(
                        f"the request body did not arrive within {self.body_timeout:g} s"
                    )
                    raise stopped from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if not message.get("more_body", False):
                    body_done = True
                if seen > self.max_body:
                    stopped = self._too_large()
                    raise stopped
            return message

        async def guarded_send(message: Message) -> None:
            # the app may turn the error raised in receive() into an answer of its own
            # (FastAPI's bare 400); the limit's own answer goes out instead
            nonlocal answered
            if stopped is not None:
                if not answered:
                    answered = True
                    await refuse(send, stopped)
                return
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except (PayloadTooLarge, RequestTimeout):
            if not answered:
                answered = True
                assert stopped is not None
                await refuse(send, stopped)

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body over {self.max_body} bytes")


class NoNulInUrl:
    """Refuse a path or query string holding a NUL character (``%00``) with 422.

    Ids and filters go to the store as text, and PostgreSQL refuses NUL in text while
    SQLite keeps it: refusing it here gives every store, and every route, one behaviour.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            query = bytes(scope.get("query_string", b"")).lower()
            if "\x00" in scope.get("path", "") or b"%00" in query or b"\x00" in query:
                if scope["type"] == "http":
                    await send_error(send, 422, "InvalidInput", "the URL holds a NUL character")
                    return
                await send({"type": "websocket.close", "code": 4422})
                return
        await self.app(scope, receive, send)


async def refuse(send: Send, exc: SignoffError) -> None:
    """Answer ``exc`` as its status and ``{error, detail}`` body."""
    await _send_json(send, status_of(exc), error_body(exc))


async def send_error(send: Send, status: int, kind: str, detail: str) -> None:
    """Answer ``status`` with ``{"error": kind, "detail": detail}``."""
    await _send_json(send, status, json.dumps({"error": kind, "detail": detail}).encode())


async def _send_json(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # the rest of the request may still be on its way: do not read it
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
