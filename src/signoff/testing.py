"""Public fakes for testing code that uses signoff: a memory service, a fake clock, captured events.

>>> clock = FakeClock()
>>> service = memory_service(clock=clock)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from signoff.bus.local import LocalBus, Subscription
from signoff.domain.events import Event
from signoff.domain.principals import Principal
from signoff.service import Service
from signoff.store.memory import MemoryStore

if TYPE_CHECKING:
    from signoff.domain.policies import Policy

__all__ = ["ADMIN", "AGENT", "APPROVER", "CapturedEvents", "FakeClock", "memory_service"]

AGENT = Principal(name="agent", role="agent")
"""A ready agent principal."""
APPROVER = Principal(name="alice", role="approver")
"""A ready approver principal."""
ADMIN = Principal(name="root", role="admin")
"""A ready admin principal."""


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        """Move time forward and return the new now."""
        self.now += timedelta(seconds=seconds)
        return self.now


def memory_service(
    *,
    clock: FakeClock | None = None,
    policy: Policy | None = None,
) -> Service:
    """A service on the memory store and an in-process bus, with no file previews."""
    return Service(
        MemoryStore(),
        bus=LocalBus(),
        policy=policy,
        clock=clock or FakeClock(),
        read_file=None,
    )


class CapturedEvents:
    """Collects every event a service publishes, for assertions."""

    def __init__(self, service: Service) -> None:
        self._subscription: Subscription = service.bus.subscribe()
        self.events: list[Event] = []

    def drain(self) -> list[Event]:
        """Every event published so far, in order (also kept in ``events``)."""
        while True:
            event = self._subscription.get_nowait()
            if event is None:
                return self.events
            self.events.append(event)

    @property
    def types(self) -> list[str]:
        """The types of the events drained so far."""
        return [e.type for e in self.drain()]

    def close(self) -> None:
        """Stop capturing."""
        self._subscription.close()
