"""Signed one-click links: what a token binds, and that no other token passes for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from signoff.notify.links import MAX_LIFETIME, BadLink, link_expiry, sign_link, verify_link

KEY = b"k" * 32
NOW = datetime(2026, 1, 1, tzinfo=UTC)
UNTIL = NOW + timedelta(hours=1)


def _token(**changes: str) -> str:
    fields = {"request_id": "req_1", "decision": "approve", "recipient": "Ann@Example.com"}
    fields.update(changes)
    return sign_link(
        KEY,
        request_id=fields["request_id"],
        decision="reject" if fields["decision"] == "reject" else "approve",
        recipient=fields["recipient"],
        expires_at=UNTIL,
    )


def test_a_token_says_what_it_was_signed_for() -> None:
    """Request, decision, the address lower-cased and the expiry come back as signed."""
    link = verify_link(KEY, _token(), now=NOW)
    assert (link.request_id, link.decision, link.recipient) == (
        "req_1",
        "approve",
        "ann@example.com",
    )
    assert link.expires_at == UNTIL
    assert link.mac == _token().split(".")[1]


def test_every_flipped_character_is_refused() -> None:
    """Changing any one character of a token (payload or MAC) makes it worthless."""
    token = _token()
    for at, char in enumerate(token):
        for other in {"A", "B", "_", "-", "."} - {char}:
            with pytest.raises(BadLink):
                verify_link(KEY, token[:at] + other + token[at + 1 :], now=NOW)


def test_another_key_expiry_or_garbage_is_refused() -> None:
    """Another server's key, an expired link and malformed tokens are refused."""
    with pytest.raises(BadLink, match="signature"):
        verify_link(b"x" * 32, _token(), now=NOW)
    with pytest.raises(BadLink, match="expired"):
        verify_link(KEY, _token(), now=UNTIL)
    for garbage in ("", "abc", "a.b.c", "!!!.???", "x" * 2000):
        with pytest.raises(BadLink):
            verify_link(KEY, garbage, now=NOW)


def test_tokens_differ_by_request_decision_and_recipient() -> None:
    """Each bound field changes the MAC: one link never stands for another."""
    macs = {
        _token().split(".")[1],
        _token(request_id="req_2").split(".")[1],
        _token(decision="reject").split(".")[1],
        _token(recipient="bob@example.com").split(".")[1],
    }
    assert len(macs) == 4


def test_a_link_expires_with_its_request_within_a_week() -> None:
    """The request's expiry when sooner, else the longest a link lives."""
    assert link_expiry(UNTIL, NOW) == UNTIL
    assert link_expiry(None, NOW) == NOW + MAX_LIFETIME
    assert link_expiry(NOW + timedelta(days=30), NOW) == NOW + MAX_LIFETIME
