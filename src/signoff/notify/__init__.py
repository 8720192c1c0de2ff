"""Notification channels: the :class:`Sender` each channel implements, and its failure.

The dispatcher (:mod:`signoff.notify.dispatcher`) follows the event log and calls the sender
of a route's channel: ``send`` for each notice, ``update`` when the request it announced is
decided or expires. The built-in senders (webhook, Slack, email) register the same way a
third party's would: the server is given a list of senders, one per channel name.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import JsonValue

from signoff.domain.notify import Notice, Route
from signoff.domain.requests import Request
from signoff.errors import SendFailed

__all__ = ["SendFailed", "Sender"]


class Sender(Protocol):
    """Delivers notices on one channel (``slack``, ``email``, ``webhook``)."""

    channel: str
    """The ``type`` of the route targets it delivers to."""

    async def send(
        self, notice: Notice, request: Request, route: Route
    ) -> dict[str, JsonValue] | None:
        """Deliver; return the ref to store (or None); raise :class:`SendFailed` to fail
        (retried with backoff, shown in ``signoff notify list``)."""
        ...

    async def update(self, notice: Notice, request: Request, route: Route) -> None:
        """The request changed (decided, expired): update what was sent, if the channel can."""
        ...
