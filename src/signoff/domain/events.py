"""Events: what subscribers (wait, watch, WebSocket, webhooks) learn after each commit."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from signoff.domain.built import built
from signoff.domain.requests import Request

__all__ = ["Event", "EventDraft", "EventType", "committed_event", "event_draft"]

EventType: TypeAlias = Literal["created", "decided", "status", "result"]
"""``created``: submitted; ``decided``: a decision ended the pending state;
``status``: any other change (a quorum vote, expiry, cancel, claim); ``result``: it ran."""


class EventDraft(BaseModel):
    """An event a write wants published; the store gives it a sequence number."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: EventType
    """What happened."""
    request: Request
    """The request as it is after the change."""


class Event(BaseModel):
    """A committed event, numbered in commit order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    """Position in the event log; a reconnecting client asks for what came after it."""
    type: EventType
    """What happened."""
    at: datetime
    """When it was committed."""
    request: Request
    """The request as it is after the change."""

    @property
    def request_id(self) -> str:
        """The id of the request this event is about."""
        return self.request.id


def event_draft(type: EventType, request: Request) -> EventDraft:
    """A draft of a ``type`` event about ``request``, a validated record (not validated
    again)."""
    return built(EventDraft, type=type, request=request)


def committed_event(draft: EventDraft, *, seq: int, at: datetime) -> Event:
    """The event ``draft`` becomes once numbered (built without validating again)."""
    return built(Event, seq=seq, type=draft.type, at=at, request=draft.request)
