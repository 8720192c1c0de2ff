"""One ordered stream of events for a reader: what it missed from the log, then live ones.

A reader that (re)connects with ``since=<seq>`` first gets every stored event after that
seq, then live events, with no gap and no repeat: the subscription is opened before the
replay, and live events at or below the last replayed seq are skipped. A reader that
falls behind the bus is caught up from the log the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from signoff.domain.events import Event
from signoff.domain.principals import Principal
from signoff.service import Service

__all__ = ["follow_events", "visible_to"]

_REPLAY_PAGE = 500


def visible_to(event: Event, principal: Principal, session_id: str | None = None) -> bool:
    """Whether ``principal`` may see ``event`` (agents see their own requests only)."""
    if session_id is not None and event.request.session_id != session_id:
        return False
    return principal.role != "agent" or event.request.requested_by == principal.name


async def follow_events(
    service: Service,
    principal: Principal,
    *,
    since: int | None,
    session_id: str | None,
    heartbeat: float = 15.0,
) -> AsyncIterator[Event | None]:
    """Replay after ``since``, then follow live; yields None when a heartbeat is due."""
    subscription = service.bus.subscribe(session_id=session_id)
    try:
        last = since if since is not None else await service.store.last_event_seq()
        while True:
            while True:  # replay from the stored log (after a reconnect, or after lagging)
                batch = await service.store.list_events(after_seq=last, limit=_REPLAY_PAGE)
                for stored in batch:
                    last = stored.seq
                    if visible_to(stored, principal, session_id):
                        yield stored
                if len(batch) < _REPLAY_PAGE:
                    break
            while not subscription.lagged:
                live = await subscription.get(timeout=heartbeat)
                if live is None:
                    yield None
                elif live.seq > last:
                    last = live.seq
                    if visible_to(live, principal, session_id):
                        yield live
            subscription.close()
            subscription = service.bus.subscribe(session_id=session_id)
    finally:
        subscription.close()
