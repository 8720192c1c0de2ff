"""Events across servers sharing one PostgreSQL: LISTEN/NOTIFY as the wake-up, the log as truth.

Every write that appends events also runs ``pg_notify('signoff_events', <seq>)`` in its
transaction, so each listening process is woken when it commits. The notification carries
only the seq: whatever the payload size, the follower reads the events themselves from the
stored event log after the last seq it has seen, and publishes the ones this process did
not write on its local bus. A NOTIFY sent by one of this process's own connections (its
store knows their backend pids) needs no read: the service that committed it publishes it.
A lost connection is noticed, re-established with backoff, and followed by a catch-up
from the log, so nothing is missed; a slow poll covers the rare notification that never
arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from signoff.bus.follower import EventLogFollower
from signoff.bus.local import EventBus
from signoff.store.base import Store

try:
    import asyncpg
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "the PostgreSQL event bus needs asyncpg: pip install 'signoff[postgres]'"
    ) from exc

__all__ = ["CHANNEL", "PostgresEventFollower"]

CHANNEL = "signoff_events"
"""The NOTIFY channel every commit with events signals on."""

logger = logging.getLogger("signoff.bus.postgres")

_TURNS = 8
"""How many turns of the event loop a NOTIFY of this process's commit first gives its
service to publish, before waiting in steps of a twentieth of :data:`_GRACE`."""
_GRACE = 0.05
"""How long, in seconds, the follower waits for this process's service to publish its commit."""


class PostgresEventFollower(EventLogFollower):
    """Publishes other servers' events here, woken by NOTIFY, caught up from the event log."""

    def __init__(
        self,
        dsn: str,
        store: Store,
        bus: EventBus,
        *,
        poll: float = 2.0,
        max_backoff: float = 5.0,
        own_backend: Callable[[int], bool] | None = None,
    ) -> None:
        """``own_backend(pid)``: whether a NOTIFY from that backend is a commit of this
        process (the store knows its connections), which then needs no read; without it,
        every NOTIFY is read."""
        super().__init__(store, bus, interval=poll)
        self._dsn = dsn
        self._own_backend = own_backend
        self._foreign = False
        self._max_backoff = max_backoff
        self._wake = asyncio.Event()
        self._connection: Any = None
        self._notified_seq = 0
        self._connected_once = False
        self.reconnects = 0
        """How many times the listening connection was re-established (for tests, metrics)."""

    def _notified(self, _connection: object, pid: int, _channel: str, payload: str) -> None:
        with contextlib.suppress(ValueError):
            self._notified_seq = max(self._notified_seq, int(payload))
        if self._own_backend is None or not self._own_backend(pid):
            self._foreign = True
        self._wake.set()

    async def _published_here(self) -> bool:
        """Whether every seq notified since the cursor is this process's and on its bus.

        A commit of this process needs no read: its service publishes it. Only when every
        NOTIFY since the last read came from this process's own connections (the backend
        pid says) can the cursor skip ahead, once those events are on the bus; a commit of
        another server is read at once. The NOTIFY comes on another connection than the
        commit's reply, in either order, so the follower gives the service a little time
        to publish, and reads the log if the events do not come (say, the service's caller
        was cancelled between commit and publish).
        """
        if self._foreign:
            return False
        seqs = range(self._cursor + 1, self._notified_seq + 1)
        deadline = asyncio.get_running_loop().time() + _GRACE
        turns = 0
        while not all(self._bus.already_published(s) for s in seqs):
            if self._foreign or asyncio.get_running_loop().time() > deadline:
                return False
            turns += 1
            await asyncio.sleep(0 if turns < _TURNS else _GRACE / 20)
        self._cursor = max(self._cursor, seqs.stop - 1)
        return True

    async def _listen(self) -> None:
        connection = await asyncpg.connect(self._dsn)
        # kept before the next await: a stop that cancels us there still closes it
        self._connection = connection
        if self._connected_once:
            self.reconnects += 1
        self._connected_once = True
        await connection.add_listener(CHANNEL, self._notified)
        connection.add_termination_listener(lambda *_: self._wake.set())

    async def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and not connection.is_closed():
            with contextlib.suppress(Exception):
                await connection.close()

    async def stop(self) -> None:
        """Stop following and close the listening connection."""
        await super().stop()
        await self._close()

    async def _run(self) -> None:
        backoff = 0.1
        woken = False
        while True:
            try:
                connected = self._connection is not None and not self._connection.is_closed()
                if not connected:
                    await self._close()
                    await self._listen()
                    backoff = 0.1
                # after (re)connecting, after a quiet interval, and on every NOTIFY but
                # those of this process's own commits: read the log from our seq
                self._wake.clear()
                if not (connected and woken and await self._published_here()):
                    self._foreign = False  # what it notified, this read reaches
                    await self.poll_once()
                woken = False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._interval)
                    woken = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: keep trying, quietly
                logger.warning("signoff event listener: %s; reconnecting", exc)
                await self._close()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
