"""Stopping the server promptly: streams go away cleanly, long polls get a retryable 503.

Told to stop (SIGTERM, Ctrl+C), uvicorn stops accepting connections and then waits for
every open one to finish before it runs the app's lifespan shutdown; a WebSocket, an event
stream or a long poll would hold it for as long as it lasts, which is forever. So a
:class:`Shutdown` is begun first: WebSockets are closed with 1001 (going away), event
streams end (clients reconnect with ``Last-Event-ID``/``since`` and miss nothing, the log
has every event), and long polls answer 503 ``ServerStopping`` with ``Retry-After``.
:func:`prompt_server` (what ``signoff serve`` runs) begins it before uvicorn's own shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any, TypeVar

import uvicorn

from signoff.server import heap

__all__ = ["GOING_AWAY", "Shutdown", "either", "prompt_server"]

T = TypeVar("T")

GOING_AWAY = 1001
"""The WebSocket close code for a server that is going down."""


class Shutdown:
    """Whether the server is stopping, and the live streams still open."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()
        self._stopping = False
        self._streams = 0
        self._idle: asyncio.Event | None = None

    @property
    def stopping(self) -> bool:
        """Whether :meth:`begin` was called."""
        return self._stopping

    def begin(self) -> None:
        """Stop: every stream and long poll waiting on this ends now (idempotent)."""
        self._stopping = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def future(self) -> asyncio.Future[None]:
        """A future done once the server is stopping (at once, if it is)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._stopping:
            waiter.set_result(None)
        else:
            self._waiters.add(waiter)
            waiter.add_done_callback(self._waiters.discard)
        return waiter

    @contextlib.contextmanager
    def stream(self) -> Iterator[asyncio.Future[None]]:
        """A live stream, open while inside: a future done once the server is stopping.

        Counted, so that :meth:`drained` can wait for the stream to close itself.
        """
        going = self.future()
        self._streams += 1
        try:
            yield going
        finally:
            self._streams -= 1
            going.cancel()
            if not self._streams and self._idle is not None:
                self._idle.set()

    async def drained(self, timeout: float) -> None:
        """Return once no stream is open, or after ``timeout`` seconds."""
        if not self._streams:
            return
        self._idle = asyncio.Event()
        with contextlib.suppress(TimeoutError):  # (asyncio.timeout: see bus/postgres.py)
            async with asyncio.timeout(timeout):
                await self._idle.wait()


def either(*futures: asyncio.Future[Any]) -> asyncio.Future[None]:
    """A future done as soon as any of ``futures`` is."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def finish(_: object) -> None:
        if not done.done():
            done.set_result(None)

    for future in futures:
        future.add_done_callback(finish)
    return done


def prompt_server(config: uvicorn.Config, shutdown: Shutdown, *, drain: float) -> uvicorn.Server:
    """A uvicorn server that begins ``shutdown`` when told to stop, before its own shutdown.

    Streams get up to ``drain`` seconds to close themselves (1001 for WebSockets, where
    uvicorn would send 1012); ``config.timeout_graceful_shutdown`` bounds the rest.
    """

    class PromptServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            heap.settle()  # what start-up built lives as long as the process

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            shutdown.begin()
            await shutdown.drained(drain)
            await super().shutdown(sockets)

    return PromptServer(config)
