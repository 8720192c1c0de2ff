"""Serving either MCP server over stdio (what desktop clients launch) or streamable HTTP.

Over HTTP, every request must carry the server's bearer token.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

try:
    import uvicorn
    from mcp.server import Server
    from mcp.server.stdio import stdio_server
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "signoff's MCP servers need the official MCP SDK: pip install 'signoff[mcp]'"
    ) from exc


__all__ = ["serve_http", "serve_stdio"]


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until the client goes away."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    server: Server[Any],
    *,
    host: str,
    port: int,
    token: str,
    on_ready: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve ``server`` over streamable HTTP at ``/mcp``; every request needs ``token``."""
    app = server.streamable_http_app(host=host)
    guarded = _BearerGuard(app, token)
    config = uvicorn.Config(guarded, host=host, port=port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    if on_ready is None:
        await web.serve()
        return
    serving = asyncio.create_task(web.serve())
    while not web.started and not serving.done():  # noqa: ASYNC110 - uvicorn has no event
        await asyncio.sleep(0.02)
    if web.started:
        await on_ready()
    await serving


class _BearerGuard:
    """ASGI middleware: 401 for any HTTP request without the right bearer token."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._digest = hashlib.sha256(token.encode()).digest()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            body = b'{"error": "missing or wrong bearer token"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Any) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, given = value.decode("latin-1").partition(" ")
                if scheme.lower() != "bearer":
                    return False
                digest = hashlib.sha256(given.strip().encode()).digest()
                return hmac.compare_digest(digest, self._digest)
        return False
