"""Webhooks: endpoints that receive every event as a signed POST, and their delivery log.

The signature header is ``X-Signoff-Signature: t=<unix seconds>,v2=<hex>`` where the hex is
HMAC-SHA256 with the endpoint's secret over ``"<t>.<delivery id>.<event type>.<body>"``, so
a receiver can check who sent it, that it is fresh, and that neither the
``X-Signoff-Delivery`` id (which it drops repeats by) nor the ``X-Signoff-Event`` type was
changed on the way (:func:`verify_signature`).

Webhooks go only to public addresses unless the operator allows private ones
(:func:`address_refusal` says why an address is refused).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from datetime import datetime, timedelta
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

__all__ = [
    "MAX_ATTEMPTS",
    "Delivery",
    "DeliveryStatus",
    "Webhook",
    "WebhookFormat",
    "address_refusal",
    "backoff",
    "new_delivery_id",
    "new_webhook_id",
    "sign",
    "verify_signature",
]

WebhookFormat: TypeAlias = Literal["json", "slack"]
DeliveryStatus: TypeAlias = Literal["pending", "delivered", "failed"]

MAX_ATTEMPTS = 6
"""Attempts before a delivery is given up as failed (1 + 5 retries over about a minute)."""


def backoff(attempts: int) -> timedelta:
    """How long to wait after the ``attempts``-th failed attempt: 2, 4, 8, 16, 32 seconds."""
    return timedelta(seconds=2 ** min(attempts, 10))


def new_webhook_id() -> str:
    """A webhook id."""
    return "whk_" + secrets.token_urlsafe(9)


def new_delivery_id() -> str:
    """A delivery id."""
    return "dlv_" + secrets.token_urlsafe(12)


def sign(secret: str, timestamp: int, body: bytes, *, delivery_id: str, event_type: str) -> str:
    """The ``X-Signoff-Signature`` value for one delivery of ``body`` sent at ``timestamp``."""
    signed = f"{timestamp}.{delivery_id}.{event_type}.".encode() + body
    mac = hmac.new(secret.encode(), signed, hashlib.sha256)
    return f"t={timestamp},v2={mac.hexdigest()}"


def verify_signature(
    secret: str,
    header: str,
    body: bytes,
    *,
    delivery_id: str,
    event_type: str,
    now: int,
    tolerance: int = 300,
) -> bool:
    """Whether ``header`` signs this delivery (``X-Signoff-Delivery``, ``X-Signoff-Event``
    and ``body``) with ``secret``, within ``tolerance`` seconds of ``now``."""
    if "." in delivery_id or "." in event_type:
        return False  # the fields are joined by dots: no other split may sign the same bytes
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (ValueError, KeyError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, timestamp, body, delivery_id=delivery_id, event_type=event_type)
    return hmac.compare_digest(expected.split("v2=", 1)[1], fields.get("v2", ""))


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def address_refusal(address: str) -> str | None:
    """Why a webhook may not be sent to this IP address, or None if it is a public one.

    Refused: loopback, private (including unique-local ``fc00::/7`` and shared
    ``100.64.0.0/10``), link-local (``169.254.0.0/16``, cloud metadata), multicast,
    unspecified (``0.0.0.0``, ``::``) and reserved addresses, and IPv6 forms that carry an
    IPv4 address (mapped ``::ffff:a.b.c.d``, 6to4, NAT64) judged by that address.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "malformed"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return address_refusal(str(embedded))
    for kind, flag in (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
    ):
        if flag:
            return kind
    if not ip.is_global:
        return "non-public"
    return None


class Webhook(BaseModel):
    """An endpoint that receives every event."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Public id."""
    url: str
    """Where events are POSTed."""
    secret: str
    """HMAC key shared with the receiver (kept, since signing needs it)."""
    format: WebhookFormat = "json"
    """``json``: the event as the API sends it; ``slack``: a Slack incoming-webhook message."""
    created_by: str
    """Who added it."""
    created_at: datetime
    """When."""
    active: bool = True
    """Whether it still receives events."""


class Delivery(BaseModel):
    """One event's delivery to one webhook, with its attempts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Public id; also sent as ``X-Signoff-Delivery``."""
    webhook_id: str
    """The endpoint."""
    event_seq: int
    """The event delivered."""
    event_type: str
    """Its type."""
    request_id: str
    """The request it is about."""
    status: DeliveryStatus = "pending"
    """pending (to be tried), delivered (a 2xx came back) or failed (gave up)."""
    attempts: int = 0
    """Attempts made so far."""
    next_attempt_at: datetime
    """When to try next (pending only)."""
    last_status_code: int | None = None
    """The HTTP status of the last attempt, if any came back."""
    last_error: str | None = None
    """Why the last attempt failed."""
    created_at: datetime
    """When the event was queued for this webhook."""
    delivered_at: datetime | None = None
    """When it was delivered."""
