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
        # made on the first event: most of a waiter's subscriptions never see one, and an
        # empty deque takes 600 bytes
        self._queue: deque[Event] | None = None
        self._maxsize = maxsize
        self._waiter: asyncio.Future[None] | None = None
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
        if self._queue is None:
            self._queue = deque()
        elif len(self._queue) >= self._maxsize:
            self.lagged = True
            return
        self._queue.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or None after ``timeout`` seconds."""
        # one future and one timer per wait, no task (as asyncio.wait_for makes): with a
        # thousand WebSocket readers per event this was most of what fanning out cost
        if not self._queue:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = None
            if timeout is not None:
                timer = loop.call_later(timeout, _wake, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if not self._queue:
                return None
        return self._queue.popleft()

    def interrupt(self, _cause: object = None) -> None:
        """Wake a :meth:`get` that is waiting now: it returns None, as after its timeout.

        Takes (and ignores) an argument, so that it can be a future's done callback.
        """
        waiter = self._waiter
        if waiter is not None:
            _wake(waiter)

    def get_nowait(self) -> Event | None:
        """The next queued event, or None when none is queued."""
        return self._queue.popleft() if self._queue else None

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


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


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
    """Fan-out to subscribers in this process; publishing never blocks on a slow reader.

    Subscriptions are indexed by what they filter on: by request id (those with a session
    filter too are checked against it on offer), by session id, or unfiltered. An event is
    offered to its request's subscriptions, its session's and the unfiltered ones: ten
    thousand agents waiting on ten thousand requests cost each event two dictionary lookups,
    not ten thousand filter checks.
    """

    def __init__(self, *, maxsize: int = 10_000) -> None:
        self._by_request: dict[str, set[Subscription]] = {}
        self._by_session: dict[str, set[Subscription]] = {}
        self._unfiltered: set[Subscription] = set()
        self._maxsize = maxsize
        self._recent: deque[int] = deque(maxlen=_RECENT)
        self._recent_set: set[int] = set()
        self.offers = 0
        """How many times an event was offered to a subscription (what publishing costs)."""

    async def publish(self, events: Sequence[Event]) -> None:
        """Offer each event to the subscriptions that may want it, in order; a seq
        published already is skipped.

        The skip makes delivery once per seq: a follower may read one of this process's
        commits from the log in the moment before the service that made it publishes it.
        """
        for event in events:
            if event.seq in self._recent_set:
                continue
            self._remember(event.seq)
            # offer() never calls back into the bus, so the sets stay put while iterated
            for index, key in (
                (self._by_request, event.request.id),
                (self._by_session, event.request.session_id),
            ):
                for subscription in index.get(key, ()):
                    subscription.offer(event)
                    self.offers += 1
            for subscription in self._unfiltered:
                subscription.offer(event)
            self.offers += len(self._unfiltered)

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
        if request_id is not None:
            self._by_request.setdefault(request_id, set()).add(subscription)
        elif session_id is not None:
            self._by_session.setdefault(session_id, set()).add(subscription)
        else:
            self._unfiltered.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Forget a subscription (again is harmless)."""
        if subscription.request_id is not None:
            _discard(self._by_request, subscription.request_id, subscription)
        elif subscription.session_id is not None:
            _discard(self._by_session, subscription.session_id, subscription)
        else:
            self._unfiltered.discard(subscription)

    @property
    def subscriber_count(self) -> int:
        """How many subscriptions are open."""
        indexed = self._by_request.values(), self._by_session.values()
        return len(self._unfiltered) + sum(len(s) for index in indexed for s in index)


def _discard(index: dict[str, set[Subscription]], key: str, subscription: Subscription) -> None:
    """Remove ``subscription`` from ``index[key]``, and the key once nobody is left on it."""
    subscriptions = index.get(key)
    if subscriptions is not None:
        subscriptions.discard(subscription)
        if not subscriptions:
            del index[key]
