"""Webhooks: endpoints that receive every event as a signed POST, and their delivery log.

The signature header is ``X-Signoff-Signature: t=<unix seconds>,v1=<hex>`` where the hex is
HMAC-SHA256 with the endpoint's secret over ``"<t>.<body>"``, so a receiver can check
both who sent it and that it is fresh (:func:`verify_signature`).
"""

from __future__ import annotations

import hashlib
import hmac
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


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Signoff-Signature`` value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify_signature(
    secret: str, header: str, body: bytes, *, now: int, tolerance: int = 300
) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` within ``tolerance`` seconds of now."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (ValueError, KeyError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, timestamp, body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))


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
