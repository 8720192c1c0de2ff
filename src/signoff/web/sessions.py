"""Inbox sign-in: a session cookie derived from an API token, and its CSRF token.

Signing in with a token sets a cookie ``<token id>.<issued>.<nonce>.<mac>``, where the mac
is an HMAC-SHA256 keyed with the stored hash of that token. Nothing else is stored: the
cookie survives a server restart, dies with its token (revoked tokens sign nobody in) and
expires after :data:`SESSION_MAX_AGE`. The CSRF token is a second HMAC over the same
fields, so a page can carry it and the server can check it without a session table.

Every unsafe request (anything but GET, HEAD and OPTIONS) that authenticates by cookie
must carry the CSRF token, as ``X-CSRF-Token`` (the inbox's scripts) or a ``csrf`` form
field (its forms), and must not come from another origin.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from signoff.domain.principals import DECIDER_ROLES, Principal, TokenRecord
from signoff.errors import NotAllowed, Unauthenticated
from signoff.service import Service

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "SAFE_METHODS",
    "SESSION_MAX_AGE",
    "WebSession",
    "check_origin",
    "cookie_principal",
    "issue_session",
    "read_session",
]

COOKIE = "signoff_session"
"""Name of the inbox's session cookie."""

CSRF_HEADER = "x-csrf-token"
"""Header the inbox's scripts send the CSRF token in."""

SESSION_MAX_AGE = 12 * 3600
"""Seconds a sign-in lasts."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class WebSession:
    """A signed-in person: who, and the CSRF token their pages must send back."""

    principal: Principal
    csrf: str
    cookie: str


def _mac(record: TokenRecord, purpose: str, fields: str) -> str:
    key = bytes.fromhex(record.token_hash)
    return hmac.new(key, f"{purpose}|{fields}".encode(), hashlib.sha256).hexdigest()


def issue_session(record: TokenRecord, *, now: float | None = None) -> WebSession:
    """A fresh session for the person holding ``record``'s token."""
    issued = int(now if now is not None else time.time())
    fields = f"{record.id}|{issued}|{secrets.token_urlsafe(12)}"
    cookie = fields.replace("|", ".") + "." + _mac(record, "session", fields)
    return WebSession(record.principal, _mac(record, "csrf", fields), cookie)


async def read_session(
    service: Service, cookie: str | None, *, now: float | None = None
) -> WebSession | None:
    """The session a cookie stands for, or None when it is absent, forged, old or revoked."""
    if not cookie or len(cookie) > 300:
        return None
    parts = cookie.split(".")
    if len(parts) != 4 or not (parts[1].isascii() and parts[1].isdigit()):
        return None
    token_id, issued, nonce, mac = parts
    age = (now if now is not None else time.time()) - int(issued)
    if not 0 <= age <= SESSION_MAX_AGE:
        return None
    record = await service.store.get_token(token_id)
    if record is None or record.revoked_at is not None or record.role not in DECIDER_ROLES:
        return None
    fields = f"{token_id}|{issued}|{nonce}"
    if not hmac.compare_digest(mac, _mac(record, "session", fields)):
        return None
    return WebSession(record.principal, _mac(record, "csrf", fields), cookie)


def check_origin(conn: HTTPConnection) -> None:
    """Refuse a cookie-authenticated call that a page on another origin made."""
    origin = conn.headers.get("origin")
    if origin is None:
        # browsers send Origin on every cross-origin POST and WebSocket; its absence
        # means a same-origin navigation or a client that is not a browser
        return
    host = conn.headers.get("host", "")
    if urlsplit(origin).netloc != host:
        raise NotAllowed("cross-origin request refused")


async def cookie_principal(conn: HTTPConnection) -> Principal | None:
    """The principal behind the inbox's session cookie, checking CSRF on unsafe calls."""
    service: Service = conn.app.state.service
    session = await read_session(service, conn.cookies.get(COOKIE))
    if session is None:
        if conn.cookies.get(COOKIE):
            raise Unauthenticated("the inbox session has expired; sign in again")
        return None
    check_origin(conn)
    if conn.scope["type"] == "http" and conn.scope["method"] not in SAFE_METHODS:
        sent = conn.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
            raise NotAllowed("missing or wrong CSRF token")
    return session.principal
