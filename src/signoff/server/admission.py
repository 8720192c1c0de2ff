"""How many requests run in the app's call chain at once: a burst enters a few at a time.

Ten thousand agents opening their long polls at the same moment would otherwise all be in
the call chain together, each waiting for the store (its token, its request) with its
middleware frames, FastAPI's dependency state and the store read's objects, about 11 KB
each. Python's allocator keeps the pools and 1 MiB arenas those transients freed as long as
one long-lived object (the parked wait's, the connection's) was placed among them: the
first wave of 10,000 waiters cost 32 KB of RSS each where their objects take 20 KB. Let in
a few at a time, the transients of one reuse the memory the last freed, and the parked
waits' objects pack together (bench/RESULTS.md, "10,000 waiting agents").

A request holds its slot until its app call returns (a parked wait returns at once) or for
``lease`` seconds at most: a stream, a slow store or a handler waiting on another request
then lets the next ones in, so the gate bounds how many fast requests overlap and never
stops the server.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["IN_APP", "LEASE", "Admission"]

IN_APP = 64
"""Requests in the app's call chain at once (beyond those past their lease)."""

LEASE = 0.1
"""Seconds a request holds its slot at most."""


class Admission:
    """At most ``limit`` requests in the call chain at once, each for ``lease`` s at most."""

    def __init__(self, *, limit: int = IN_APP, lease: float = LEASE) -> None:
        self._free = limit
        self._lease = lease
        self._queue: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot."""
        return len(self._queue)

    async def enter(self) -> Slot:
        """Wait for a slot (at once while one is free); release it with :meth:`Slot.leave`."""
        if self._free > 0 and not self._queue:
            self._free -= 1
        else:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.append(turn)
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._pass_on()  # it was handed the slot as it was cancelled
                elif turn in self._queue:  # (a slot passed on skips it, if it came first)
                    self._queue.remove(turn)
                raise
        return Slot(self, self._lease)

    def _pass_on(self) -> None:
        """A slot is free: hand it to the first request still waiting, or keep it."""
        while self._queue:
            turn = self._queue.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1


class Slot:
    """One request's place in the call chain, given back once: by the request or its lease."""

    __slots__ = ("_admission", "_timer")

    def __init__(self, admission: Admission, lease: float) -> None:
        self._admission = admission
        self._timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(
            lease, self.leave
        )

    def leave(self) -> None:
        """Give the slot back (the second call, the lease's or the request's, does nothing)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            self._admission._pass_on()
