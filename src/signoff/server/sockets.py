"""Connection guards below the ASGI app: a deadline for each request head, a socket cap.

``signoff serve`` speaks HTTP/1.1 through uvicorn's httptools protocol (the llhttp parser,
in C): a request through it costs the server about a quarter less CPU than through h11's
pure-Python one (``GET /healthz`` 330 against 448 us, a whole lifecycle's five requests 9.6
against 10.6 ms; bench/RESULTS.md). uvicorn keeps a connection open for as long as a client
takes to send a request head, so a few hundred clients sending a byte now and then hold a
server's sockets forever, and its parser keeps whatever a head holds (h11 refused one over
16 KB). :func:`guarded_protocol` gives each head a deadline and a size limit, and the
server a cap on open connections; the body's deadline and size limit are ``BodyLimit``'s
(server/limits.py), as the body is read through the app's ``receive()``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from http import HTTPStatus
from typing import Any, Literal

from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from signoff.errors import InvalidHeader, RequestTimeout, ServerBusy
from signoff.server.admission import IN_APP, LEASE, Admission
from signoff.server.errors import error_body, status_of
from signoff.server.limits import refuse
from signoff.server.parking import Park, run_parkable

__all__ = ["MAX_HEAD", "guarded_protocol"]

MAX_HEAD = 64 * 1024
"""The most a request head (its request line and headers) may take, in bytes."""


class _HeadTooLarge(Exception):
    """Raised inside the parser to stop it once a head over :data:`MAX_HEAD` is refused."""


def guarded_protocol(
    *, header_timeout: float, max_connections: int, in_app: int = IN_APP, lease: float = LEASE
) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, closing slow or large request heads and answering 503
    over the cap.

    A connection must deliver each request head within ``header_timeout`` seconds of
    opening, or of the previous response; one that sent part of a head gets a 408 first.
    A head over :data:`MAX_HEAD` bytes gets a 400 ``InvalidHeader`` and the connection is
    closed, whether it came at once or a piece at a time.
    Beyond ``max_connections`` open sockets (WebSockets and event streams included), each
    new connection's request is answered 503 ``ServerBusy`` and the connection closed.
    Each request may park (server/parking.py): its handler returns, and the connection's
    task answers later; a parked request hears of its client going away. At most
    ``in_app`` requests run the app's call chain at once, each for ``lease`` seconds at most
    (server/admission.py), so that a burst of them does not leave the heap full of holes.
    """
    admission = Admission(limit=in_app, lease=lease)

    class GuardedHttpProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._head_bytes = 0
            self._awaiting_head = True
            """No complete request head since the last response (or the connection's start)."""
            self._in_head = True
            """The parser is between requests or inside a head (not inside a body)."""
            self._head_size = 0
            """Bytes of the head being read, counted while whole chunks of it arrive."""
            self._heads = 0
            """Request heads read so far."""
            self._park: Park | None = None
            self._inner = self.app
            self.app = self._parkable
            self.pipeline = _Pipeline()  # type: ignore[assignment]

        async def _parkable(self, scope: Scope, receive: Receive, send: Send) -> None:
            park = self._park = Park()
            try:
                await run_parkable(self._admitted, park, scope, receive, send)
            finally:
                if self._park is park:
                    self._park = None

        async def _admitted(self, scope: Scope, receive: Receive, send: Send) -> None:
            slot = await admission.enter()
            try:
                await self._inner(scope, receive, send)  # a parked request returns at once
            finally:
                slot.leave()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            flow = self.flow
            # uvicorn's (0.54) flow control event; left as it is if a release names it otherwise
            writable = getattr(flow, "_is_writable_event", None)
            if type(writable) is asyncio.Event:
                flow._is_writable_event = _lazy(writable)
            if len(self.connections) > max_connections:
                self.app = _busy
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._awaiting_head:
                self._head_bytes += len(data)
            in_head, heads = self._in_head, self._heads
            super().data_received(data)
            if in_head and self._in_head and self._heads == heads:  # all of it: one head's
                self._head_size += len(data)
                if self._head_size > MAX_HEAD and not self.transport.is_closing():
                    self._refuse_head()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head = True
            self._head_size = 0

        def on_headers_complete(self) -> None:
            self._awaiting_head = False
            self._disarm()
            self._in_head = False
            self._heads += 1
            size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
            if size > MAX_HEAD:  # it came in a few large chunks
                self._refuse_head()
                raise _HeadTooLarge
            before = self.cycle
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not before and type(cycle.message_event) is asyncio.Event:
                cycle.message_event = _lazy(cycle.message_event)  # a new request's

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # the last head read has been answered, and no other waits (pipelined)
            if self.transport.is_closing() or self.pipeline or not self.cycle.response_complete:
                return
            self._awaiting_head = True
            self._head_bytes = 0
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)
            if self._park is not None:
                self._park.lose()

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(header_timeout, self._head_too_slow)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def send_400_response(self, msg: str) -> None:
            if not self.transport.is_closing():  # not after a refusal of our own
                super().send_400_response(msg)

        def _refuse_head(self) -> None:
            large = InvalidHeader(f"the request head is larger than {MAX_HEAD} bytes")
            self.transport.write(_raw_response(status_of(large), error_body(large)))
            self.transport.close()

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or not self._awaiting_head:
                return
            if self._head_bytes:
                # a client idle between requests gets no answer (it might take a 408 for the
                # reply to its next request); one that started a head is told why
                late = RequestTimeout(
                    f"the request head did not arrive within {header_timeout:g} s"
                )
                self.transport.write(_raw_response(status_of(late), error_body(late)))
            self.transport.close()

    return GuardedHttpProtocol


class _Pipeline(list[Any]):
    """The requests read ahead of their turn on a connection (HTTP pipelining), oldest
    last, as uvicorn's ``deque`` holds them: an empty list is 56 bytes, an empty deque
    its first block too, about 700 (per connection, idle or waiting)."""

    def appendleft(self, item: Any) -> None:
        """Queue ``item`` behind the others."""
        self.insert(0, item)


class LazyEvent(asyncio.Event):
    """An :class:`asyncio.Event` whose queue of waiters is made by its first waiter.

    uvicorn gives each connection and each request an event that is rarely waited on (the
    socket being writable again; more of the body); asyncio's makes its deque at once, a
    0.5 KB block each, 1 KB of every idle connection's and parked long poll's memory.
    """

    async def wait(self) -> Literal[True]:
        """Wait until the flag is set (at once if it is)."""
        if not self._waiters:
            self._waiters = deque()
        return await super().wait()


def _lazy(event: asyncio.Event) -> LazyEvent:
    """A :class:`LazyEvent` in ``event``'s state (nobody waits on it yet)."""
    lazy = LazyEvent()
    lazy._waiters = ()  # type: ignore[assignment]  # set() and clear() only iterate it
    if event.is_set():
        lazy.set()
    return lazy


async def _busy(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "http":
        await refuse(send, ServerBusy("the server has as many connections open as it may"))


def _raw_response(status: int, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body
