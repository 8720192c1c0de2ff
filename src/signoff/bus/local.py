"""The in-process event bus: fans committed events out to asyncio subscribers."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Protocol, Self

from signoff.domain.events import Event

__all__ = ["EventBus", "LocalBus", "Subscription"]

_RECENT = 10_000


class Subscription:
    """A subscriber's queue of events, filtered by request or session.

    Use as an async context manager (it unsubscribes on exit) and an async iterator. A
    subscriber that falls more than ``maxsize`` events behind is marked ``lagged`` and
    receives nothing more; it should re-read from the store's event log.
    """

    def __init__(
        self,
        bus: LocalBus,
        *,
        request_id: str | None,
        session_id: str | None,
        maxsize: int,
    ) -> None:
        self._bus = bus
        self.request_id = request_id
        self.session_id = session_id
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=maxsize)
        self.lagged = False

    def wants(self, event: Event) -> bool:
        """Whether this event passes the subscription's filters."""
        if self.request_id is not None and event.request.id != self.request_id:
            return False
        return self.session_id is None or event.request.session_id == self.session_id

    def offer(self, event: Event) -> None:
        """Queue ``event`` if wanted, without blocking the publisher."""
        if self.lagged or not self.wants(event):
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.lagged = True

    async def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or None after ``timeout`` seconds."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None

    def get_nowait(self) -> Event | None:
        """The next queued event, or None when none is queued."""
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def close(self) -> None:
        """Stop receiving events."""
        self._bus.unsubscribe(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            event = await self.get()
            if event is not None:
                yield event


class EventBus(Protocol):
    """Where committed events go, and where waiters and watchers read them."""

    async def publish(self, events: Sequence[Event]) -> None:
        """Deliver committed events to every matching subscriber."""

    def subscribe(
        self, *, request_id: str | None = None, session_id: str | None = None
    ) -> Subscription:
        """A new subscription; close it (or leave its ``async with``) when done."""

    def already_published(self, seq: int) -> bool:
        """Whether the event with this seq went through this bus recently."""


class LocalBus:
    """Fan-out to subscribers in this process; publishing never blocks on a slow reader."""

    def __init__(self, *, maxsize: int = 10_000) -> None:
        self._subscribers: set[Subscription] = set()
        self._maxsize = maxsize
        self._recent: deque[int] = deque(maxlen=_RECENT)
        self._recent_set: set[int] = set()

    async def publish(self, events: Sequence[Event]) -> None:
        """Offer each event to every subscriber, in order."""
        for event in events:
            self._remember(event.seq)
            for subscription in list(self._subscribers):
                subscription.offer(event)

    def _remember(self, seq: int) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._recent_set.discard(self._recent[0])
        self._recent.append(seq)
        self._recent_set.add(seq)

    def already_published(self, seq: int) -> bool:
        """Whether this seq was published here among the last 10,000 events."""
        return seq in self._recent_set

    def subscribe(
        self, *, request_id: str | None = None, session_id: str | None = None
    ) -> Subscription:
        """A new subscription filtered by request and/or session."""
        subscription = Subscription(
            self, request_id=request_id, session_id=session_id, maxsize=self._maxsize
        )
        self._subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Forget a subscription."""
        self._subscribers.discard(subscription)

    @property
    def subscriber_count(self) -> int:
        """How many subscriptions are open."""
        return len(self._subscribers)
