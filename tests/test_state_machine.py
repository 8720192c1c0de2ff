"""Property test: random operation sequences never reach an illegal state.

A hypothesis state machine drives the memory service with random submits, decisions,
claims (with leases), renewals, results, cancels and clock moves, and after every step
checks that each request's status history follows ``TRANSITIONS``, terminal states never
change, versions only grow, every executing call holds a lease, and the audit chain
verifies; after a sweep no call is left executing past its lease, and a call the lease
failed was claimed once.

Random operations may be refused (a caller error is a legal outcome), so the machine also
takes steps that must succeed (a person decides a live request as its kind allows, the agent
claims an approved call with its approved args and reports on it, the agent withdraws a live
request), and the test asserts that the runs reached every terminal state and that decisions
succeeded: broken transitions fail it instead of being swallowed as refusals.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Coroutine
from typing import Any, ClassVar, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.domain.requests import TERMINAL, TRANSITIONS, ApprovalRequest, Request, Status
from signoff.domain.transitions import LEASE_LAPSED, is_overdue
from signoff.errors import CallerError
from signoff.service import Service
from signoff.testing import FakeClock, memory_service

PRINCIPALS = [
    Principal(name="agent", role="agent"),
    Principal(name="alice", role="approver"),
    Principal(name="bob", role="approver"),
    Principal(name="root", role="admin"),
]
T = TypeVar("T")
DECIDERS = PRINCIPALS[1:]
"""Who may decide the agent's requests: every person, never the agent itself."""
ARG_CHOICES = [{"x": 1}, {"x": 2}, {}]
EXPIRY_POLICY = Policy.from_toml(
    '[expiry]\nexpires_in = 15\non_expire = "default"\n'
    '[[rules]]\ntool = "t"\naction = "ask"\non_expire = "approve"\n'
)
"""Expiry (after 15 s) approves tool calls and gives choice and questions their defaults."""
APPROVALS: dict[str, dict[str, Any]] = {
    "approval": {"type": "approve"},
    "choice": {"type": "choose", "choice": "a"},
    "questions": {"type": "answer", "answers": {"q1": "yes"}},
}
"""A decision that approves a live request of each kind, as the submit rule files it."""

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

    tally: ClassVar[Counter[str]] = Counter()
    """Across all runs: each operation's successes and refusals, and each status reached."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.service: Service = memory_service(clock=self.clock, policy=EXPIRY_POLICY)
        self.history: dict[str, list[tuple[int, Status]]] = {}

    def run(self, operation: str, coro: Any) -> Any:
        """Run one service call; caller errors are legal outcomes, not failures (counted)."""
        try:
            result = self.loop.run_until_complete(coro)
        except CallerError:
            self.tally[f"{operation} refused"] += 1
            return None
        self.tally[f"{operation} ok"] += 1
        return result

    def must(self, operation: str, coro: Coroutine[Any, Any, T]) -> T:
        """Run one service call that the rules allow: a caller error here is a bug."""
        try:
            result = self.loop.run_until_complete(coro)
        except CallerError as refused:
            raise AssertionError(f"{operation} was refused: {refused}") from refused
        self.tally[f"{operation} ok"] += 1
        return result

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
        submitted = self.run("submit", self.service.submit(body, PRINCIPALS[0]))
        if submitted is not None:
            self.history.setdefault(submitted.request.id, [])

    @precondition(lambda self: self.history)
    @rule(data=st.data(), decision=decisions, who=st.sampled_from(PRINCIPALS))
    def decide(self, data: st.DataObject, decision: dict[str, Any], who: Principal) -> None:
        request_id = data.draw(st.sampled_from(self.ids()))
        self.run("decide", self.service.decide(request_id, decision, who))

    @precondition(lambda self: self.history)
    @rule(data=st.data(), args=st.sampled_from(ARG_CHOICES), who=st.sampled_from(PRINCIPALS))
    def claim(self, data: st.DataObject, args: dict[str, Any], who: Principal) -> None:
        request_id = data.draw(st.sampled_from(self.ids()))
        self.run("claim", self.service.claim(request_id, args, who))

    def in_status(self, status: Status) -> list[ApprovalRequest]:
        """Approval requests now in ``status``."""
        found = []
        for request_id in self.history:
            request = self.loop.run_until_complete(self.service.get(request_id))
            if isinstance(request, ApprovalRequest) and request.status == status:
                found.append(request)
        return found

    def live(self) -> list[Request]:
        """Requests still pending and not yet overdue: a person may decide them now."""
        found = []
        for request_id in self.history:
            request = self.loop.run_until_complete(self.service.get(request_id))
            if request.status == "pending" and not is_overdue(request, self.clock()):
                found.append(request)
        return found

    @rule(data=st.data(), yes=st.booleans(), who=st.sampled_from(DECIDERS))
    def decide_a_live_request(self, data: st.DataObject, yes: bool, who: Principal) -> None:
        """A person approves or rejects a live request as its kind allows: it must succeed."""
        live = self.live()
        if not live:
            return
        request = data.draw(st.sampled_from(live))
        decision = APPROVALS[request.kind] if yes else {"type": "reject", "reason": "no"}
        decided = self.must("decide a live request", self.service.decide(request.id, decision, who))
        assert decided.status == ("approved" if yes else "rejected")

    @rule(data=st.data())
    def withdraw_a_live_request(self, data: st.DataObject) -> None:
        """The agent withdraws a live request it filed: it must succeed."""
        live = self.live()
        if live:
            request = data.draw(st.sampled_from(live))
            withdrawn = self.must("withdraw", self.service.cancel(request.id, PRINCIPALS[0]))
            assert withdrawn.status == "canceled"

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
            claimed = self.must("claim an approved call", claim)
            assert claimed.status == "executing"

    @rule(data=st.data(), ok=st.booleans())
    def run_an_approved_call(self, data: st.DataObject, ok: bool) -> None:
        """The agent claims an approved call and reports at once how it went: both succeed."""
        approved = self.in_status("approved")
        if not approved:
            return
        request = data.draw(st.sampled_from(approved))
        assert request.approved_args is not None
        agent = PRINCIPALS[0]
        claim = self.service.claim(request.id, request.approved_args, agent)
        self.must("claim an approved call", claim)
        self.statuses_move_only_along_transitions()  # the model sees it executing
        if ok:
            reported = self.must("complete", self.service.complete(request.id, agent, "ran"))
        else:
            reported = self.must("fail", self.service.fail(request.id, agent, "boom"))
        assert reported.status == ("completed" if ok else "failed")

    @initialize(end=st.sampled_from(sorted(TERMINAL)))
    def start_by_seeing_a_call_through(self, end: Status) -> None:
        """Each run begins with one call taken to a terminal state, whatever steps follow."""
        self.see_a_call_through(end)

    @rule(end=st.sampled_from(sorted(TERMINAL)))
    def see_a_call_through(self, end: Status) -> None:
        """File a call and take it to the terminal state ``end``: every step must succeed.

        It runs in a session and on a tool of its own, so no grant the random steps made
        decides it at once.
        """
        agent, person = PRINCIPALS[0], DECIDERS[0]
        body: dict[str, Any] = {"session_id": "through", "tool_name": "run", "tool_args": {}}
        body["expires_in"] = 1 if end == "expired" else None
        filed = self.must("submit", self.service.submit(body, agent)).request
        assert filed.status == "pending"
        self.history[filed.id] = []
        self.statuses_move_only_along_transitions()
        if end == "expired":
            self.time_passes(1)
        elif end == "canceled":
            self.must("withdraw", self.service.cancel(filed.id, agent))
        elif end == "rejected":
            reject = {"type": "reject", "reason": "no"}
            self.must("decide a live request", self.service.decide(filed.id, reject, person))
        else:
            approve = {"type": "approve"}
            self.must("decide a live request", self.service.decide(filed.id, approve, person))
            self.statuses_move_only_along_transitions()
            self.must("claim an approved call", self.service.claim(filed.id, {}, agent))
            self.statuses_move_only_along_transitions()
            if end == "completed":
                self.must("complete", self.service.complete(filed.id, agent, "ran"))
            else:
                self.must("fail", self.service.fail(filed.id, agent, "boom"))
        final = self.loop.run_until_complete(self.service.get(filed.id))
        assert final.status == end, (end, final.status)

    @rule(data=st.data(), who=st.sampled_from(PRINCIPALS), lease=st.sampled_from([1, 10]))
    def renew_a_claim(self, data: st.DataObject, who: Principal, lease: int) -> None:
        """Anyone tries to renew an executing call's lease; only its claimant can."""
        executing = self.in_status("executing")
        if executing:
            request = data.draw(st.sampled_from(executing))
            self.run("renew", self.service.renew(request.id, who, lease=lease))

    @rule(data=st.data(), ok=st.booleans())
    def report_a_result(self, data: st.DataObject, ok: bool) -> None:
        """Report success or failure of an executing call."""
        executing = self.in_status("executing")
        if not executing:
            return
        request = data.draw(st.sampled_from(executing))
        agent = PRINCIPALS[0]
        if ok:
            reported = self.must("complete", self.service.complete(request.id, agent, "ran"))
        else:
            reported = self.must("fail", self.service.fail(request.id, agent, "boom"))
        assert reported.status == ("completed" if ok else "failed")

    @precondition(lambda self: self.history)
    @rule(data=st.data(), ok=st.booleans(), who=st.sampled_from(PRINCIPALS))
    def finish(self, data: st.DataObject, ok: bool, who: Principal) -> None:
        request_id = data.draw(st.sampled_from(self.ids()))
        if ok:
            self.run("finish", self.service.complete(request_id, who, result="done"))
        else:
            self.run("finish", self.service.fail(request_id, who, "boom"))

    @precondition(lambda self: self.history)
    @rule(data=st.data(), who=st.sampled_from(PRINCIPALS))
    def cancel(self, data: st.DataObject, who: Principal) -> None:
        request_id = data.draw(st.sampled_from(self.ids()))
        self.run("cancel", self.service.cancel(request_id, who))

    @rule(seconds=st.integers(0, 15))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)
        self.must("sweep", self.service.expire_due())
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
            self.tally[f"reached {current.status}"] += 1
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


SETTINGS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    # too_slow times data generation by the wall clock, and a test must not fail on timing
    # (a loaded runner); the other health checks stay on.
    suppress_health_check=[HealthCheck.too_slow],
)


def test_lifecycle() -> None:
    """Random operation sequences never reach an illegal state, and they do reach each end.

    A run whose every decision was refused would pass the invariants trivially, so the
    runs together must have reached every terminal state, and the steps that must succeed
    must have decided requests (random decisions, mostly refused, are counted alongside).
    """
    tally: Counter[str] = Counter()
    Lifecycle.tally = tally
    run_state_machine_as_test(Lifecycle, settings=SETTINGS)
    unreached = sorted(s for s in TERMINAL if not tally[f"reached {s}"])
    assert not unreached, f"no run reached {unreached}: {dict(tally)}"
    assert tally["decide a live request ok"] > 0, dict(tally)
