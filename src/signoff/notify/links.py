"""Signed one-click links: an emailed approve or reject, bound to one request and one person.

A link's token is the credential: whoever holds it may decide, as the person it was sent
to, the one request it names, the one way it names, until it expires, once. So it carries
those four things and an HMAC-SHA256 over them with a key derived from the server secret
(never stored, never sent): changing any byte, or reusing it for another request, another
decision or another address, fails the constant-time check. Single use is the service's
(``Service.use_once`` keyed by the token's MAC); this module is pure.

Token: ``base64url(payload) "." base64url(mac)``, payload ``v1\\n<request id>\\n<approve|
reject>\\n<address>\\n<expiry, unix seconds>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeAlias

__all__ = [
    "MAX_LIFETIME",
    "BadLink",
    "LinkDecision",
    "SignedLink",
    "link_expiry",
    "link_key",
    "sign_link",
    "verify_link",
]

LinkDecision: TypeAlias = Literal["approve", "reject"]

MAX_LIFETIME = timedelta(days=7)
"""How long a link lives when its request never expires (or expires later than this)."""

_VERSION = "v1"
_MAX_TOKEN = 1024
_LABEL = b"signoff email links\0"


class BadLink(ValueError):
    """A token that is malformed, forged, altered or expired; the message says which."""


@dataclass(frozen=True, kw_only=True)
class SignedLink:
    """What a valid token says: who may decide which request which way, until when."""

    request_id: str
    """The one request it decides."""
    decision: LinkDecision
    """Approve or reject: the only thing it can do."""
    recipient: str
    """The address it was sent to, lower-cased (mapped to a person by ``people link``)."""
    expires_at: datetime
    """After this it is refused."""
    mac: str
    """The token's MAC (url-safe): its single-use key."""


def link_key(server_key: bytes) -> bytes:
    """The links' own key from the server's, so a link's MAC is never a session's."""
    return hmac.new(server_key, _LABEL, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def link_expiry(request_expires_at: datetime | None, now: datetime) -> datetime:
    """A link expires with its request, and within :data:`MAX_LIFETIME` of being sent."""
    latest = now + MAX_LIFETIME
    return latest if request_expires_at is None else min(request_expires_at, latest)


def sign_link(
    key: bytes,
    *,
    request_id: str,
    decision: LinkDecision,
    recipient: str,
    expires_at: datetime,
) -> str:
    """The url-safe token for ``decision`` on ``request_id`` by ``recipient`` until then."""
    if "\n" in request_id or "\n" in recipient:
        raise ValueError("a request id or address with a newline cannot be signed")
    payload = "\n".join(
        [
            _VERSION,
            request_id,
            decision,
            recipient.strip().lower(),
            str(int(expires_at.timestamp())),
        ]
    ).encode("utf-8")
    mac = hmac.new(link_key(key), payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(mac)}"


def verify_link(key: bytes, token: str, *, now: datetime) -> SignedLink:
    """What ``token`` grants, if it was signed with ``key`` and has not expired."""
    if not 0 < len(token) <= _MAX_TOKEN or token.count(".") != 1:
        raise BadLink("not a signoff link")
    encoded, sent_mac = token.split(".")
    try:
        payload = _unb64(encoded)
        mac = _unb64(sent_mac)
    except (binascii.Error, ValueError):
        raise BadLink("not a signoff link") from None
    expected = hmac.new(link_key(key), payload, hashlib.sha256).digest()
    # the MAC first, in constant time: nothing in an unsigned payload is looked at
    # and only the canonical spelling: no second token (another single-use key) for one MAC
    if not hmac.compare_digest(mac, expected) or (_b64(payload), _b64(mac)) != (encoded, sent_mac):
        raise BadLink("this link's signature does not match: it was altered or not ours")
    version, request_id, decision, recipient, expiry = payload.decode("utf-8").split("\n")
    if version != _VERSION or decision not in ("approve", "reject"):
        raise BadLink("not a signoff link")
    expires_at = datetime.fromtimestamp(int(expiry), UTC)
    if now >= expires_at:
        raise BadLink("this link has expired")
    return SignedLink(
        request_id=request_id,
        decision="approve" if decision == "approve" else "reject",
        recipient=recipient,
        expires_at=expires_at,
        mac=sent_mac,
    )
