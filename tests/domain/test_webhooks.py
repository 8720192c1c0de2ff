"""Webhook signatures and which addresses a webhook may target: pure functions."""

from __future__ import annotations

import pytest

from signoff.domain.webhooks import address_refusal, sign, verify_signature


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - a target refused, not a bind
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("100.64.0.1", "non-public"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("2002:7f00:1::", "loopback"),
        ("64:ff9b::a00:1", "private"),
        ("not an address", "malformed"),
    ],
)
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    """Each non-public address (and IPv6 forms carrying one) is refused, saying which kind."""
    assert address_refusal(address) == kind


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_are_allowed(address: str) -> None:
    """Public IPv4 and IPv6 addresses, mapped or not, may be targeted."""
    assert address_refusal(address) is None


def test_the_signature_covers_delivery_id_and_event_type() -> None:
    """Changing the body, the delivery id or the event type breaks the signature."""
    header = sign("key", 1000, b"{}", delivery_id="dlv_a", event_type="created")
    assert header.startswith("t=1000,v2=")
    assert verify_signature(
        "key", header, b"{}", delivery_id="dlv_a", event_type="created", now=1000
    )
    assert not verify_signature(
        "key", header, b"{} ", delivery_id="dlv_a", event_type="created", now=1000
    )
    assert not verify_signature(
        "key", header, b"{}", delivery_id="dlv_b", event_type="created", now=1000
    )
    assert not verify_signature(
        "key", header, b"{}", delivery_id="dlv_a", event_type="decided", now=1000
    )
    # no other split of the same dotted string verifies
    dotted = sign("key", 1000, b"{}", delivery_id="dlv", event_type="a.created")
    assert not verify_signature(
        "key", dotted, b"{}", delivery_id="dlv.a", event_type="created", now=1000
    )
    assert not verify_signature(
        "key", header, b"{}", delivery_id="dlv_a", event_type="created", now=1000 + 301
    )
