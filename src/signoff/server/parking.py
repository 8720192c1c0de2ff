"""A long poll parked on its connection: the app's handler returns, the answer comes later.

An idle ``GET /requests/{id}/wait`` used to hold the whole ASGI call chain while it waited:
FastAPI's routing and dependency frames and exit stacks, Starlette's middleware frames and
ours, about 20 KB of its 36. Under ``signoff serve`` the connection's HTTP protocol
(server/sockets.py) runs the app through :func:`run_parkable`, which puts a :class:`Park`
in the request's scope. A handler that finds it may hand it a coroutine function and answer
:class:`ParkedResponse`: the call chain returns at once, keeping only the ``send`` it was
given (the middlewares' small closures, which still add their headers and note the status),
and the protocol's task then runs the handed-over coroutine, which answers through that
``send`` when it is ready. Without the protocol (a test client, another server) there is no
:class:`Park`, and the handler answers the usual way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["EXTENSION", "Park", "ParkedResponse", "park_of", "run_parkable"]

EXTENSION = "signoff.park"
"""The scope extension that holds the request's :class:`Park`."""

Later = Callable[[Send], Awaitable[None]]
"""What answers a parked request later, given the call chain's ``send``."""


class Park:
    """Where a handler leaves the rest of its work, and how it hears of a lost client."""

    __slots__ = ("_ended", "_lost", "later", "send")

    def __init__(self) -> None:
        self.later: Later | None = None
        """Set by the handler: the coroutine function that answers later."""
        self.send: Send | None = None
        self._lost: Callable[[], None] | None = None
        self._ended: list[Callable[[], None]] = []

    @property
    def parked(self) -> bool:
        """Whether the handler returned leaving its answer for later."""
        return self.later is not None and self.send is not None

    def on_lost(self, lost: Callable[[], None] | None) -> None:
        """Call ``lost()`` if the client goes away while parked (None: no longer)."""
        self._lost = lost

    def lose(self) -> None:
        """The connection is gone: tell whoever waits."""
        lost, self._lost = self._lost, None
        if lost is not None:
            lost()

    def on_ended(self, ended: Callable[[], None]) -> None:
        """Call ``ended()`` once the parked request has been answered (or its client lost)."""
        self._ended.append(ended)

    def end(self) -> None:
        """The parked request is over: what waited for that hears of it."""
        ended, self._ended = self._ended, []
        for callback in ended:
            callback()


class ParkedResponse(Response):
    """What a handler returns when it has parked: keeps the chain's ``send``, sends nothing."""

    def __init__(self, park: Park, later: Later) -> None:
        super().__init__()
        self.park = park
        self.later = later

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.park.send = send
        self.park.later = self.later


def park_of(scope: Any) -> Park | None:
    """The request's :class:`Park`, when its connection can park it."""
    found = (scope.get("extensions") or {}).get(EXTENSION)
    return found if isinstance(found, Park) else None


async def run_parkable(
    app: ASGIApp, park: Park, scope: Scope, receive: Receive, send: Send
) -> None:
    """Run ``app`` for one request with ``park`` in its scope; then its parked answer, if any.

    What stays while a request is parked: this frame, the handed-over coroutine's, and the
    chain's ``send`` closures.
    """
    scope.setdefault("extensions", {})[EXTENSION] = park
    await app(scope, receive, send)
    if park.parked:
        assert park.later is not None and park.send is not None
        for key in [key for key, value in scope.items() if isinstance(value, AsyncExitStack)]:
            del scope[key]  # FastAPI's, closed once the handler returned, but left in the scope
        later, chained = park.later, park.send
        park.later = park.send = None
        try:
            await later(chained)
        finally:
            park.on_lost(None)
            park.end()
