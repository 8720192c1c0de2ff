"""domain.transitions: who may decide, the hosted run's starter, and how a decision came in."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from signoff.domain.decisions import Approve, Reject
from signoff.domain.principals import Principal
from signoff.domain.requests import Request
from signoff.domain.submission import NewRequest, build_request
from signoff.domain.transitions import apply_decision, check_may_decide, starter_may_approve
from signoff.errors import InvalidDecision, NotAllowed

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Principal(name="alice", role="approver")
BOB = Principal(name="bob", role="approver")


def hosted_call(**governance: Any) -> Request:
    """A pending call filed by a hosted agent in a run alice started."""
    new = NewRequest(session_id="task", tool_name="shell", tool_args={"command": "deploy"})
    return build_request(
        new, requested_by="agent:deploy", now=NOW, started_by="alice", **governance
    )


def test_an_agent_may_never_decide() -> None:
    """check_may_decide refuses an agent and lets approvers and admins through."""
    with pytest.raises(NotAllowed, match="may not decide"):
        check_may_decide(Principal(name="bot", role="agent"))
    check_may_decide(ALICE)
    check_may_decide(Principal(name="root", role="admin"))


def test_an_agent_is_refused_before_the_state_is_looked_at() -> None:
    """Even on a request that is no longer pending, an agent gets NotAllowed, not a 409."""
    decided = apply_decision(hosted_call(), Reject(reason="no"), BOB, NOW).request
    with pytest.raises(NotAllowed):
        apply_decision(decided, Approve(), Principal(name="agent:deploy", role="agent"), NOW)


@pytest.mark.parametrize(
    ("governance", "may"),
    [
        ({}, True),
        ({"starter_may_approve": False}, False),
        ({"approvers": ("carol",)}, False),
        ({"approvers": ("alice", "carol")}, True),
        ({"quorum": 2}, False),
    ],
)
def test_the_starter_may_approve_unless_policy_makes_them_the_requester(
    governance: dict[str, Any], may: bool
) -> None:
    """starter_may_approve: true by default; false with the setting, approvers without them
    or a quorum."""
    request = hosted_call(**governance)
    assert starter_may_approve(request) is may
    if may:
        assert apply_decision(request, Approve(), ALICE, NOW).request.status == "approved"
    else:
        with pytest.raises(NotAllowed):
            apply_decision(request, Approve(), ALICE, NOW)
        if "approvers" not in governance:  # counted as the requester, they may still reject
            assert (
                apply_decision(request, Reject(reason="no"), ALICE, NOW).request.status
                == "rejected"
            )


def test_allow_self_approval_lets_a_starter_counted_as_requester_approve() -> None:
    """The starter counts as the requester, so allow_self_approval applies to them too."""
    request = hosted_call(starter_may_approve=False, allow_self_approval=True)
    assert apply_decision(request, Approve(), ALICE, NOW).request.status == "approved"


def test_a_request_without_a_starter_has_none_who_may_approve_as_such() -> None:
    """No started_by: starter_may_approve is False and nothing about the starter applies."""
    new = NewRequest(session_id="s", tool_name="shell")
    request = build_request(new, requested_by="bot", now=NOW)
    assert starter_may_approve(request) is False
    assert apply_decision(request, Approve(), ALICE, NOW).request.status == "approved"


def test_a_decision_made_in_an_mcp_client_is_recorded_as_such() -> None:
    """via mcp-elicitation and the client's name go into the record and the audit."""
    change = apply_decision(
        hosted_call(), Approve(), BOB, NOW, via="mcp-elicitation", client="desk"
    )
    assert change.request.decision is not None
    assert change.request.decision.via == "mcp-elicitation"
    assert change.request.decision.client == "desk"
    assert change.request.decision.by_person
    assert change.audit.details["via"] == "mcp-elicitation"
    assert change.audit.details["client"] == "desk"
    plain = apply_decision(hosted_call(), Approve(), BOB, NOW)
    assert plain.request.decision is not None and plain.request.decision.via == "person"
    assert "via" not in plain.audit.details


@pytest.mark.parametrize(
    ("via", "client"), [("person", "desk"), ("mcp-elicitation", ""), ("mcp-elicitation", "x" * 201)]
)
def test_a_client_name_only_comes_with_mcp_elicitation(via: Any, client: str) -> None:
    """client without mcp-elicitation, empty or too long: InvalidDecision."""
    with pytest.raises(InvalidDecision):
        apply_decision(hosted_call(), Approve(), BOB, NOW, via=via, client=client)


def test_a_call_that_is_not_editable_is_approved_as_proposed_or_not_at_all() -> None:
    """editable=false: approve with other args is InvalidDecision; plain or same args approve."""
    new = NewRequest(session_id="s", tool_name="shell", tool_args={"command": "ls"}, editable=False)
    request = build_request(new, requested_by="bot", now=NOW)
    with pytest.raises(InvalidDecision, match="may not be edited"):
        apply_decision(request, Approve(args={"command": "rm -rf /"}), ALICE, NOW)
    same = apply_decision(request, Approve(args={"command": "ls"}), ALICE, NOW).request
    plain = apply_decision(request, Approve(), ALICE, NOW).request
    assert same.status == plain.status == "approved"
    editable = build_request(new.model_copy(update={"editable": None}), requested_by="b", now=NOW)
    edited = apply_decision(editable, Approve(args={"command": "pwd"}), ALICE, NOW).request
    assert edited.status == "approved"
