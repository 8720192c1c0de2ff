"""uvicorn's WebSocket protocol, with a way for the hub to write pre-made frames itself.

Through ASGI, every message to every WebSocket is a coroutine call down the middleware stack
to uvicorn, which frames the text for that one socket. The hub (server/hub.py) sends the same
events to a thousand sockets: it frames each event once (a server's frames are not masked,
so one frame's bytes serve every client) and writes those bytes to each socket's transport
with a plain synchronous write. :class:`HubWebSocketProtocol` (``signoff serve`` passes it as
uvicorn's ``ws=``) puts itself in the connection's ASGI scope, under
``extensions["signoff.socket"]``, for the app's handler to hand to the hub; a transport
without it (a test client, another server) is served through plain ASGI sends instead.

Once the hub has the socket, nothing of the ASGI app is needed to keep it: the handler
hands it over (:meth:`~HubWebSocketProtocol.keep`) and returns, and the socket stays open,
owned by the hub, until either end closes it. An idle socket then holds no task, no coroutine
frames down the middleware stack, no handshake headers and no receive queue: about half
of what it held while its handler waited.
"""

from __future__ import annotations

import contextlib
import socket
from asyncio import BaseTransport
from collections.abc import Callable
from typing import Any, cast

from starlette.websockets import WebSocket
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

__all__ = ["EXTENSION", "HubWebSocketProtocol", "direct_socket", "socket_of"]

EXTENSION = "signoff.socket"
"""The scope extension that holds the connection's :class:`HubWebSocketProtocol`."""

ABORT_AFTER = 5.0
"""Seconds a socket the server closed gets to echo the close before it is cut.

uvicorn's own wait ends in ``transport.close()``, which first flushes the write buffer: for a
client that stopped reading that is forever, with the buffer held."""


SEND_BUFFER = 256 * 1024
"""The kernel's send buffer for each WebSocket (Linux doubles it), instead of its autotuned
up to 4 MB (``tcp_wmem``): with it, a client that stopped reading is found (server/hub.py's
``BACKLOG``) after about a megabyte, not five, and holds no more than that."""


class _Nothing:
    """What a kept socket has instead of its receive queue and writable event: no app reads
    the one or waits on the other any more, so what uvicorn puts in them goes nowhere."""

    def put_nowait(self, _: object) -> None:
        pass

    def empty(self) -> bool:
        return True

    def set(self) -> None:
        pass

    def clear(self) -> None:
        pass


_NOTHING: Any = _Nothing()


class HubWebSocketProtocol(WebSocketsSansIOProtocol):
    """A WebSocket connection the hub can write frames to and close without the ASGI app."""

    kept = False
    """Whether the app's handler has returned, leaving the open socket to the hub."""
    _on_closed: list[Callable[[], None]] | None = None

    def connection_made(self, transport: BaseTransport) -> None:
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        if not self.close_sent:  # upgraded: the app's task is made but has not run yet
            extensions: dict[str, Any] = self.scope.setdefault("extensions", {}) or {}
            extensions[EXTENSION] = {"socket": self}

    def keep(self, closed: Callable[[], None]) -> bool:
        """Keep the socket open after the app's handler returns; ``closed()`` once it closes.

        Call it just before the handler returns, when the hub writes to the socket. What
        the client sends from then on is read and dropped (clients of ``/ws`` have nothing
        to say; reading on frees the buffer and sees the close). False, and nothing kept,
        when the socket is closing already.
        """
        if self.close_sent or self.disconnected or self.transport.is_closing():
            return False
        self.kept = True
        self.on_closed(closed)
        # what only the handshake and the app's receive() and send() used (the parser's
        # generator keeps the request it parsed: its headers are emptied instead)
        self.request.headers.clear()
        del self.request, self.response, self.scope
        self.queue = self.writable = _NOTHING
        self.frames = []
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        return True

    def on_closed(self, closed: Callable[[], None]) -> None:
        """Call ``closed()`` once a kept socket's connection is lost (now, if it is)."""
        if self.disconnected:  # lost while the app was still returning
            closed()
            return
        if self._on_closed is None:
            self._on_closed = []
        self._on_closed.append(closed)

    def send_receive_event_to_app(self) -> None:
        if self.kept:
            self.frames = []
        else:
            super().send_receive_event_to_app()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        callbacks, self._on_closed = self._on_closed or [], None
        for closed in callbacks:
            closed()

    async def run_asgi(self) -> None:
        # uvicorn's, except that a socket the handler kept stays open when the app returns
        try:
            result = await self.app(self.scope, self.receive, self.send)
        except ClientDisconnected:
            pass
        except BaseException:
            self.logger.exception("Exception in ASGI application\n")
            self.send_500_response()
        else:
            if not self.handshake_complete:
                self.logger.error("ASGI callable returned without completing handshake.")
                self.send_500_response()
            elif result is not None:
                self.logger.error("ASGI callable should return None, but returned '%s'.", result)
        if self.close_timer is None and not self.kept:
            self.transport.close()

    def write_frames(self, frames: bytes) -> int:
        """Write ready-made frames; the bytes still buffered after, or -1 if closing."""
        if self.close_sent or self.transport.is_closing():
            return -1
        self.transport.write(frames)
        return self.transport.get_write_buffer_size()

    def close_now(self, code: int, reason: str) -> None:
        """Send a close frame now, as the app's ``websocket.close`` would, without awaiting.

        The app's handler, waiting on ``receive()``, gets ``websocket.disconnect`` at once;
        a client that does not answer within :data:`ABORT_AFTER` seconds is cut, its unsent
        frames dropped.
        """
        if self.close_sent or self.transport.is_closing():
            return
        self.queue.put_nowait({"type": "websocket.disconnect", "code": code, "reason": reason})
        self.conn.send_close(code, reason)
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        self.close_timer = self.loop.call_later(ABORT_AFTER, self.transport.abort)


def direct_socket(websocket: WebSocket) -> HubWebSocketProtocol | None:
    """The connection's :class:`HubWebSocketProtocol`, when it is served by one."""
    return socket_of(websocket.scope)


def socket_of(scope: Any) -> HubWebSocketProtocol | None:
    """The :class:`HubWebSocketProtocol` serving an ASGI ``scope``, if one does."""
    holder = cast(dict[str, Any], (scope.get("extensions") or {}).get(EXTENSION) or {})
    found = holder.get("socket")
    return found if isinstance(found, HubWebSocketProtocol) else None
