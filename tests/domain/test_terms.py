"""Terms: policy sets expiry and a person's choices; a requester may only make them stricter."""

from __future__ import annotations

import pytest

from signoff.domain.terms import Terms, settle
from signoff.errors import InvalidRequest

APPROVE_AFTER_HOUR = Terms(expires_in=3600, on_expire="approve", set_by="rules[0] in p.toml")


def test_a_requester_may_not_choose_approval_by_expiry() -> None:
    """on_expire approve (or default) from the requester is refused unless policy says so."""
    with pytest.raises(InvalidRequest, match="on_expire: on_expire is set by policy"):
        settle("approval", Terms(), expires_in=0.5, on_expire="approve")
    with pytest.raises(InvalidRequest, match="on_expire"):
        settle("choice", Terms(expires_in=60), on_expire="default")
    same = settle("approval", APPROVE_AFTER_HOUR, on_expire="approve")
    assert (same.on_expire, same.expires_in) == ("approve", 3600)


def test_a_requester_may_only_expire_sooner_and_then_rejects() -> None:
    """A shorter expiry rejects; a longer one is cut to policy's; reject is always allowed."""
    sooner = settle("approval", APPROVE_AFTER_HOUR, expires_in=5)
    assert (sooner.expires_in, sooner.on_expire) == (5, "reject")
    assert "requester" in sooner.set_by and "rules[0] in p.toml" in sooner.set_by
    later = settle("approval", APPROVE_AFTER_HOUR, expires_in=7200)
    assert (later.expires_in, later.on_expire) == (3600, "approve")
    assert later.set_by == "rules[0] in p.toml"
    stricter = settle("approval", APPROVE_AFTER_HOUR, on_expire="reject")
    assert (stricter.expires_in, stricter.on_expire) == (3600, "reject")
    with pytest.raises(InvalidRequest, match="on_expire"):
        settle("approval", APPROVE_AFTER_HOUR, expires_in=5, on_expire="approve")
    own = settle("approval", Terms(), expires_in=5)
    assert (own.expires_in, own.on_expire) == (5, "reject")


def test_policy_on_expire_fits_the_kind() -> None:
    """approve does nothing for choice requests, default nothing for tool calls: they reject."""
    defaults = Terms(expires_in=60, on_expire="default")
    assert settle("approval", defaults).on_expire == "reject"
    assert settle("choice", defaults, on_expire="default").on_expire == "default"
    assert settle("choice", APPROVE_AFTER_HOUR).on_expire == "reject"
    assert settle("questions", APPROVE_AFTER_HOUR).on_expire == "approve"


def test_only_policy_takes_reject_away() -> None:
    """A requester's narrowing must keep reject; policy's may drop it; requests only narrow."""
    with pytest.raises(InvalidRequest, match="allowed_decisions: a requester may not"):
        settle("approval", Terms(), allowed_decisions=["approve"])
    with pytest.raises(InvalidRequest, match="allowed_decisions"):
        settle("choice", Terms(), allowed_decisions=["choose"])
    assert settle("approval", Terms(), allowed_decisions=["reject"]).allowed_decisions == (
        "reject",
    )
    assert settle(
        "approval", Terms(), allowed_decisions=["approve", "reject"]
    ).allowed_decisions == (
        "approve",
        "reject",
    )
    no_reject = Terms(allowed_decisions=("approve", "respond"))
    assert settle("approval", no_reject).allowed_decisions == ("approve", "respond")
    narrowed = settle("approval", no_reject, allowed_decisions=["approve", "reject"])
    assert narrowed.allowed_decisions == ("approve",)
