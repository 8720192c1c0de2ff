"""Property test: random operation sequences never reach an illegal state.

A hypothesis state machine drives the memory service with random submits, decisions,
claims (with leases), renewals, results, cancels and clock moves, and after every step
checks that each request's status history follows ``TRANSITIONS``, terminal states never
change, versions only grow, every executing call holds a lease, and the audit chain
verifies; after a sweep no call is left executing past its lease, and a call the lease
failed was claimed once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.domain.requests import TERMINAL, TRANSITIONS, ApprovalRequest, Request, Status
from signoff.domain.transitions import LEASE_LAPSED
from signoff.errors import CallerError
from signoff.service import Service
from signoff.testing import FakeClock, memory_service

PRINCIPALS = [
    Principal(name="agent", role="agent"),
    Principal(name="alice", role="approver"),
    Principal(name="bob", role="approver"),
    Principal(name="root", role="admin"),
]
ARG_CHOICES = [{"x": 1}, {"x": 2}, {}]
EXPIRY_POLICY = Policy.from_toml(
    '[expiry]\nexpires_in = 15\non_expire = "default"\n'
    '[[rules]]\ntool = "t"\naction = "ask"\non_expire = "approve"\n'
)
"""Expiry (after 15 s) approves tool calls and gives choice and questions their defaults."""

decisions = st.one_of(
    st.builds(dict, type=st.just("approve")),
    st.builds(dict, type=st.just("approve"), args=st.sampled_from(ARG_CHOICES)),
    st.builds(dict, type=st.just("approve"), scope=st.sampled_from(["session", "always"])),
    st.builds(dict, type=st.just("reject"), reason=st.text(max_size=5)),
    st.builds(dict, type=st.just("respond"), feedback=st.just("do this instead")),
    st.builds(dict, type=st.just("choose"), choice=st.sampled_from(["a", "b", "zzz"])),
    st.builds(dict, type=st.just("choose"), choices=st.lists(st.sampled_from(["a", "b"]))),
    st.builds(dict, type=st.just("answer"), answers=st.just({"q1": "yes"})),
)


class Lifecycle(RuleBasedStateMachine):
    """Random operations on one service; the model is the history of each request's status."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.service: Service = memory_service(clock=self.clock, policy=EXPIRY_POLICY)
        self.history: dict[str, list[tuple[int, Status]]] = {}

    def run(self, coro: Any) -> Any:
        """Run one service call; caller errors are legal outcomes, not failures."""
        try:
            return self.loop.run_until_complete(coro)
        except CallerError:
            return None

    def ids(self) -> list[str]:
        return list(self.history)

    @rule(
        kind=st.sampled_from(["approval", "choice", "questions"]),
        expires=st.one_of(st.none(), st.integers(1, 20)),
        on_expire=st.sampled_from(["reject", "approve", "default"]),
        call_id=st.one_of(st.none(), st.sampled_from(["c1", "c2"])),
    )
    def submit(self, kind: str, expires: int | None, on_expire: str, call_id: str | None) -> None:
        body: dict[str, Any] = {"session_id": "s", "kind": kind, "expires_in": expires}
        if on_expire != "reject":
            body["expires_in"] = None  # an expiry the requester asks for always rejects
        if kind == "approval":
            body |= {"tool_name": "t", "tool_args": {"x": 1}, "tool_call_id": call_id}
            body["on_expire"] = "approve" if on_expire == "approve" else "reject"
        elif kind == "choice":
            body |= {"prompt": "p", "options": ["a", "b"], "on_expire": on_expire}
            if on_expire == "approve":
                body["on_expire"] = "reject"
            if on_expire == "default":
                body["default_choice"] = "a"
        else:
            body |= {"questions": ["q?"], "on_expire": on_expire}
            if on_expire == "default":
                body["default_answers"] = {"q1": "later"}
        submitted = self.run(self.service.submit(body, PRINCIPALS[0]))
        if submitted is not None:
            self.history.setdefault(submitted.request.id, [])

    @precondition(lambda self: self.history)
    @rule(data=st.data(), decision=decisions, who=st.sampled_from(PRINCIPALS))
    def decide(self, data: st.DataObject, decision: dict[str, Any], who: Principal) -> None:
        request_id = data.draw(st.sampled_from(self.ids()))
        self.run(self.service.decide(request_id, decision, who))

    @precondition(lambda self: self.history)
    @rule(data=st.data(), args=st.sampled_from(ARG_CHOICES), who=st.sampled_from(PRINCIPALS))
    def claim(self, data: st.DataObject, args: dict[str, Any], who: Principal) -> None:
        request_id = data.draw(st.sampled_from(self.ids()))
        self.run(self.service.claim(request_id, args, who))

    def in_status(self, status: Status) -> list[ApprovalRequest]:
        """Approval requests now in ``status``."""
        found = []
        for request_id in self.history:
            request = self.loop.run_until_complete(self.service.get(request_id))
            if isinstance(request, ApprovalRequest) and request.status == status:
                found.append(request)
        return found

    @rule(data=st.data(), lease=st.sampled_from([1, 10, 300]))
    def claim_an_approved_call(self, data: st.DataObject, lease: int) -> None:
        """Claim an approved call with exactly its approved args, for ``lease`` seconds."""
        approved = self.in_status("approved")
        if approved:
            request = data.draw(st.sampled_from(approved))
            assert request.approved_args is not None
            claim = self.service.claim(
                request.id, request.approved_args, PRINCIPALS[0], lease=lease
            )
            self.run(claim)

    @rule(data=st.data(), who=st.sampled_from(PRINCIPALS), lease=st.sampled_from([1, 10]))
    def renew_a_claim(self, data: st.DataObject, who: Principal, lease: int) -> None:
        """Anyone tries to renew an executing call's lease; only its claimant can."""
        executing = self.in_status("executing")
        if executing:
            request = data.draw(st.sampled_from(executing))
            self.run(self.service.renew(request.id, who, lease=lease))

    @rule(data=st.data(), ok=st.booleans())
    def report_a_result(self, data: st.DataObject, ok: bool) -> None:
        """Report success or failure of an executing call."""
        executing = self.in_status("executing")
        if not executing:
            return
        request = data.draw(st.sampled_from(executing))
        if ok:
            self.run(self.service.complete(request.id, PRINCIPALS[0], result="ran"))
        else:
            self.run(self.service.fail(request.id, PRINCIPALS[0], "boom"))

    @precondition(lambda self: self.history)
    @rule(data=st.data(), ok=st.booleans(), who=st.sampled_from(PRINCIPALS))
    def finish(self, data: st.DataObject, ok: bool, who: Principal) -> None:
        request_id = data.draw(st.sampled_from(self.ids()))
        if ok:
            self.run(self.service.complete(request_id, who, result="done"))
        else:
            self.run(self.service.fail(request_id, who, "boom"))

    @precondition(lambda self: self.history)
    @rule(data=st.data(), who=st.sampled_from(PRINCIPALS))
    def cancel(self, data: st.DataObject, who: Principal) -> None:
        request_id = data.draw(st.sampled_from(self.ids()))
        self.run(self.service.cancel(request_id, who))

    @rule(seconds=st.integers(0, 15))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)
        self.run(self.service.expire_due())
        for request in self.in_status("executing"):
            assert request.lease_until is not None and request.lease_until > self.clock()
        for request in self.in_status("failed"):
            if request.result is not None and request.result.reported_by == "system":
                assert request.result.error == LEASE_LAPSED
                audit = self.loop.run_until_complete(self.service.audit(request.id))
                assert [e.action for e in audit].count("claim") == 1

    @invariant()
    def statuses_move_only_along_transitions(self) -> None:
        for request_id, seen in self.history.items():
            current: Request = self.loop.run_until_complete(self.service.get(request_id))
            if seen and seen[-1][0] == current.version:
                assert seen[-1][1] == current.status
                continue
            if seen:
                last_version, last_status = seen[-1]
                assert current.version > last_version
                assert last_status not in TERMINAL, f"terminal {last_status} changed"
                assert current.status == last_status or current.status in TRANSITIONS[last_status]
            else:
                assert current.status in ("pending", "approved", "rejected")
            if isinstance(current, ApprovalRequest) and current.status in (
                "executing",
                "completed",
                "failed",
            ):
                assert current.args_digest is not None and current.claimed_by is not None
                assert current.lease_until is not None and current.claimed_at is not None
                assert current.lease_until > current.claimed_at
            if current.kind != "approval":
                assert current.status not in ("executing", "completed", "failed")
            seen.append((current.version, current.status))

    @invariant()
    def audit_chain_verifies(self) -> None:
        report = self.loop.run_until_complete(self.service.verify_audit())
        assert report.ok, report

    def teardown(self) -> None:
        self.loop.close()


Lifecycle.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLifecycle = Lifecycle.TestCase
TestLifecycle.__doc__ = "Random operation sequences never reach an illegal state."
