"""One ordered stream of events for a reader: what it missed from the log, then live ones.

A reader that (re)connects with ``since=<seq>`` first gets every stored event after that
seq, then live events, with no gap and no repeat: the subscription is opened before the
replay, live events at or below the last replayed seq are skipped, and a live event past
the next expected seq sends the reader back to the log first. A reader that falls behind
the bus is caught up from the log the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from signoff.domain.events import Event
from signoff.domain.principals import Principal
from signoff.service import Service

__all__ = ["follow_events", "only_requester", "visible_to"]

_REPLAY_PAGE = 500


def visible_to(event: Event, principal: Principal, session_id: str | None = None) -> bool:
    """Whether ``principal`` may see ``event`` (agents see their own requests only)."""
    if session_id is not None and event.request.session_id != session_id:
        return False
    requester = only_requester(principal)
    return requester is None or event.request.requested_by == requester


def only_requester(principal: Principal) -> str | None:
    """The one requester whose events ``principal`` may see, or None for every event.

    The same rule as :func:`visible_to`, as a key: the event hub groups its readers by it.
    """
    return principal.name if principal.role == "agent" else None


async def follow_events(
    service: Service,
    principal: Principal,
    *,
    since: int | None,
    session_id: str | None,
    heartbeat: float = 15.0,
    until: asyncio.Future[Any] | None = None,
) -> AsyncGenerator[Event | None, None]:
    """Replay after ``since``, then follow live; yields None when a heartbeat is due.

    Ends as soon as ``until`` is done (the reader's credential stopped working), even while
    it waits for the next event.
    """
    # Unfiltered, so that a gap in the seqs means an event not here yet, never one filtered out.
    subscription = service.bus.subscribe()

    def stopped() -> bool:
        return until is not None and until.done()

    def interrupt(_: object) -> None:
        subscription.interrupt()  # the current one: a lag replaces it

    if until is not None:
        until.add_done_callback(interrupt)
    try:
        last = since if since is not None else await service.store.last_event_seq()
        while not stopped():
            while not stopped():  # replay from the stored log (after a reconnect, a lag or a gap)
                batch = await service.store.list_events(after_seq=last, limit=_REPLAY_PAGE)
                for stored in batch:
                    last = stored.seq
                    if stopped():
                        return
                    if visible_to(stored, principal, session_id):
                        yield stored
                if len(batch) < _REPLAY_PAGE:
                    break
            while not subscription.lagged and not stopped():
                live = await subscription.get(timeout=heartbeat)
                if stopped():
                    return
                if live is None:
                    yield None
                elif live.seq == last + 1:
                    last = live.seq
                    if visible_to(live, principal, session_id):
                        yield live
                elif live.seq > last:
                    # Events can reach the bus out of order (another server's come through the
                    # follower after this one's later commits, and two local commits may
                    # publish in either order). Seqs are given in commit order, so the missing
                    # ones are committed already: the log has them.
                    break
            if subscription.lagged:
                subscription.close()
                subscription = service.bus.subscribe()
    finally:
        if until is not None:
            until.remove_done_callback(interrupt)
        subscription.close()
