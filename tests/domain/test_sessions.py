"""Inbox session records, ids and cookie MACs (signoff.domain.sessions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from signoff.domain.sessions import SessionRecord, cookie_mac, hash_session_id, new_session_id

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_session_is_live_only_between_start_and_expiry_until_ended() -> None:
    """Not before it starts, not at or after expiry, never once ended."""
    record = SessionRecord(id="a", token_id="t", created_at=T0, expires_at=T0 + timedelta(hours=1))
    assert record.live(T0) and record.live(T0 + timedelta(minutes=59))
    assert not record.live(T0 - timedelta(seconds=1))
    assert not record.live(T0 + timedelta(hours=1))
    ended = record.model_copy(update={"ended_at": T0 + timedelta(minutes=1)})
    assert not ended.live(T0 + timedelta(minutes=2))


def test_ids_are_random_cookie_safe_and_stored_only_hashed() -> None:
    """Fresh ids differ, carry no dot (the cookie's separator); the stored form is a sha256."""
    ids = {new_session_id() for _ in range(100)}
    assert len(ids) == 100 and not any("." in i for i in ids)
    one = next(iter(ids))
    assert len(hash_session_id(one)) == 64 and one not in hash_session_id(one)


def test_macs_depend_on_key_and_purpose() -> None:
    """The session and CSRF MACs of one id differ, and another key gives other MACs."""
    key, other = b"k" * 32, b"o" * 32
    assert cookie_mac(key, "session", "id") != cookie_mac(key, "csrf", "id")
    assert cookie_mac(key, "session", "id") != cookie_mac(other, "session", "id")
    assert cookie_mac(key, "session", "id") == cookie_mac(key, "session", "id")
