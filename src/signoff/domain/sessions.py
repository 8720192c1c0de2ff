"""Inbox sessions: the server-side record of a browser signed in with a token.

A cookie carries a random session id and an HMAC of it under the server secret; the store
keeps only the sha256 of that id, so neither a copy of the database nor the secret alone
makes a working cookie. Ending a session (sign-out) or revoking its token ends it for every
copy of the cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from pydantic import BaseModel, ConfigDict

__all__ = [
    "SessionRecord",
    "cookie_mac",
    "hash_session_id",
    "new_session_id",
]


class SessionRecord(BaseModel):
    """A signed-in browser, as stored: never the session id itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """sha256 (hex) of the random session id the cookie carries."""
    token_id: str
    """The token it was signed in with; revoking that token ends the session too."""
    created_at: datetime
    """When it was signed in."""
    expires_at: datetime
    """When it stops working, signed out or not."""
    ended_at: datetime | None = None
    """When it was signed out, if it was."""

    def live(self, now: datetime) -> bool:
        """Whether the session still signs its browser in at ``now``."""
        return self.ended_at is None and self.created_at <= now < self.expires_at


def new_session_id() -> str:
    """A fresh session id: 192 random bits, URL- and cookie-safe, without dots."""
    return secrets.token_urlsafe(24)


def hash_session_id(session_id: str) -> str:
    """The stored form of a session id."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def cookie_mac(key: bytes, purpose: str, session_id: str) -> str:
    """HMAC-SHA256 (hex) of a session id for one purpose (``session``, ``csrf``)."""
    return hmac.new(key, f"{purpose}|{session_id}".encode(), hashlib.sha256).hexdigest()
