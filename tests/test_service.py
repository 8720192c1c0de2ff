"""The service on every store backend: submit, decide, wait, claim, complete, cancel, expire."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.transitions import DEFAULT_LEASE, LEASE_LAPSED, MAX_LEASE
from signoff.errors import (
    ArgsMismatch,
    GrantNotFound,
    InvalidDecision,
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
    RequestNotFound,
    RuntimeFailure,
    SignoffError,
    StoreUnavailable,
    Unauthenticated,
)
from signoff.service import Service
from signoff.store.base import Committed, DuplicateRequest, RequestQuery, Write
from signoff.store.memory import MemoryStore
from signoff.testing import ADMIN, AGENT, APPROVER, CapturedEvents, FakeClock

BOB = Principal(name="bob", role="approver")
ARGS: dict[str, Any] = {"command": "rm -rf build", "cwd": "/srv"}


async def submit(service: Service, **over: Any) -> Request:
    """Submit a shell call (or whatever ``over`` says) as the test agent."""
    body: dict[str, Any] = {"session_id": "s1", "tool_name": "shell", "tool_args": ARGS}
    body.update(over)
    return (await service.submit(body, AGENT)).request


async def snapshot(service: Service, request_id: str) -> tuple[int, int, int]:
    """(version, audit entries, events) to prove a refused operation changed nothing."""
    request = await service.get(request_id)
    return (
        request.version,
        len(await service.audit()),
        await service.store.last_event_seq(),
    )


async def test_full_lifecycle_emits_events_and_audits(service: Service) -> None:
    """submit, approve, claim, complete: each step is one event and one audit entry."""
    events = CapturedEvents(service)
    request = await submit(service)
    assert request.status == "pending" and request.requested_by == "agent"
    await service.decide(request.id, {"type": "approve"}, APPROVER)
    claimed = await service.claim(request.id, ARGS, AGENT)
    assert claimed.status == "executing"
    done = await service.complete(request.id, AGENT, result={"exit": 0})
    assert done.status == "completed"
    assert isinstance(done, ApprovalRequest) and done.result is not None
    assert done.result.result == {"exit": 0}
    assert events.types == ["created", "decided", "status", "result"]
    actions = [e.action for e in await service.audit(request.id)]
    assert actions == ["submit", "decide", "claim", "complete"]
    decide_entry = (await service.audit(request.id))[1]
    assert decide_entry.actor == "alice"
    assert decide_entry.details["seen"]["args"] == ARGS  # type: ignore[index,call-overload]
    assert (await service.verify_audit()).ok


async def test_a_finished_request_leaves_no_version_behind(service: Service) -> None:
    """The service keeps the last version it wrote of a request only while it can change:
    a long-running server holds its open requests, not every request it ever finished."""
    done, rejected = await submit(service), await submit(service, tool_call_id="call_2")
    await service.decide(done.id, {"type": "approve"}, APPROVER)
    await service.claim(done.id, ARGS, AGENT)
    await service.complete(done.id, AGENT, result={"exit": 0})
    await service.decide(rejected.id, {"type": "reject", "reason": "no"}, APPROVER)
    assert not service._recent
    with pytest.raises(InvalidTransition):  # read from the store, then refused as before
        await service.cancel(done.id, AGENT)
    assert (await service.get(done.id)).status == "completed"


async def test_idempotent_submit(service: Service) -> None:
    """The same session + tool_call_id, or the same idempotency key, returns the first request."""
    first = await service.submit(
        {"session_id": "s1", "tool_name": "shell", "tool_args": ARGS, "tool_call_id": "c1"}, AGENT
    )
    again = await service.submit(
        {"session_id": "s1", "tool_name": "shell", "tool_args": ARGS, "tool_call_id": "c1"}, AGENT
    )
    assert first.created and not again.created
    assert again.request.id == first.request.id
    for other in ({"tool_name": "shell", "tool_args": {}}, {"tool_name": "rm", "tool_args": ARGS}):
        with pytest.raises(InvalidRequest, match="already used in session 's1' for a different"):
            await service.submit({"session_id": "s1", "tool_call_id": "c1", **other}, AGENT)
    keyed = await service.submit(
        {"session_id": "s9", "kind": "questions", "questions": ["?"], "idempotency_key": "k"}, AGENT
    )
    keyed_again = await service.submit(
        {"session_id": "s8", "kind": "questions", "questions": ["!"], "idempotency_key": "k"},
        AGENT,
    )
    assert keyed_again.request.id == keyed.request.id
    concurrent = await asyncio.gather(
        *(
            service.submit(
                {"session_id": "s2", "tool_name": "t", "tool_args": {}, "tool_call_id": "same"},
                AGENT,
            )
            for _ in range(10)
        )
    )
    assert len({s.request.id for s in concurrent}) == 1
    assert sum(s.created for s in concurrent) == 1


async def test_call_ids_are_each_agents_own(service: Service) -> None:
    """Two agents using one session + tool_call_id + key each get (and get back) their own."""
    other = Principal(name="other", role="agent")
    body = {
        "session_id": "s1",
        "tool_name": "shell",
        "tool_args": ARGS,
        "tool_call_id": "c1",
        "idempotency_key": "k",
    }
    mine = await service.submit(body, AGENT)
    theirs = await service.submit(body, other)
    assert mine.created and theirs.created
    assert theirs.request.id != mine.request.id and theirs.request.requested_by == "other"
    racing = await asyncio.gather(
        *(
            service.submit({**body, "tool_call_id": "c2", "idempotency_key": None}, who)
            for who in [AGENT, other] * 5
        )
    )
    for who in (AGENT, other):
        own = [s for s in racing if s.request.requested_by == who.name]
        assert len(own) == 5 and len({s.request.id for s in own}) == 1
        assert sum(s.created for s in own) == 1
    again = await service.submit(body, other)
    assert not again.created and again.request.id == theirs.request.id


class CallKeyedStore(MemoryStore):
    """A store whose call ids ignore the requester, as every store's did before the fix.

    ``in_lookup`` False hides the clash from ``find_duplicate`` so only the insert meets it,
    as when another agent's submit lands between a lookup and an insert.
    """

    def __init__(self, *, in_lookup: bool) -> None:
        super().__init__()
        self.in_lookup = in_lookup

    async def _anyones(self, session_id: str, tool_call_id: str | None) -> Request | None:
        if tool_call_id is None:
            return None
        page = await self.list_requests(RequestQuery(session_id=session_id))
        calls = [r for r in page.items if isinstance(r, ApprovalRequest)]
        return next((r for r in calls if r.tool_call_id == tool_call_id), None)

    async def find_duplicate(
        self,
        *,
        session_id: str,
        tool_call_id: str | None,
        requested_by: str,
        idempotency_key: str | None,
    ) -> Request | None:
        """Also (``in_lookup``) anyone's request with this session and tool_call_id."""
        found = await self._anyones(session_id, tool_call_id) if self.in_lookup else None
        return found or await super().find_duplicate(
            session_id=session_id,
            tool_call_id=tool_call_id,
            requested_by=requested_by,
            idempotency_key=idempotency_key,
        )

    async def commit(self, write: Write) -> Committed:
        """Refuse an insert whose session and tool_call_id anyone has used."""
        new = write.insert
        if isinstance(new, ApprovalRequest):
            clash = await self._anyones(new.session_id, new.tool_call_id)
            if clash is not None:
                raise DuplicateRequest(clash.id)
        return await super().commit(write)


@pytest.mark.parametrize("in_lookup", [True, False], ids=["lookup", "insert"])
async def test_a_store_naming_another_agents_request_hands_over_nothing(in_lookup: bool) -> None:
    """A store naming another agent's request as a duplicate makes submit fail, telling nothing."""
    service = Service(CallKeyedStore(in_lookup=in_lookup), read_file=None)
    other = Principal(name="other", role="agent")
    body = {"session_id": "s1", "tool_name": "shell", "tool_args": ARGS, "tool_call_id": "c1"}
    mine = (await service.submit(body, AGENT)).request
    before = (len(await service.audit()), await service.store.last_event_seq())
    for args in (ARGS, {"command": "ls"}):
        with pytest.raises(RuntimeFailure) as caught:
            await service.submit({**body, "tool_args": args}, other)
        assert mine.id not in str(caught.value) and "s1" not in str(caught.value)
    assert (len(await service.audit()), await service.store.last_event_seq()) == before


async def test_fifty_concurrent_deciders_one_winner(service: Service) -> None:
    """Of 50 concurrent decisions on one request exactly one wins; 49 get InvalidTransition."""
    request = await submit(service)
    deciders = [Principal(name=f"approver{n}", role="approver") for n in range(50)]
    results = await asyncio.gather(
        *(
            service.decide(
                request.id,
                {"type": "approve"} if n % 2 else {"type": "reject", "reason": "no"},
                who,
            )
            for n, who in enumerate(deciders)
        ),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1
    assert len(losers) == 49 and all(isinstance(e, InvalidTransition) for e in losers)
    final = await service.get(request.id)
    assert final.version == 2
    assert [e.action for e in await service.audit(request.id)] == ["submit", "decide"]


async def test_eight_concurrent_claimers_one_execution(service: Service) -> None:
    """Of 8 concurrent claims on an approved call exactly one moves it to executing."""
    request = await submit(service)
    await service.decide(request.id, {"type": "approve"}, APPROVER)
    results = await asyncio.gather(
        *(service.claim(request.id, ARGS, AGENT) for _ in range(8)), return_exceptions=True
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, InvalidTransition) for r in results if isinstance(r, BaseException))
    assert [e.action for e in await service.audit(request.id)].count("claim") == 1


async def test_claim_binds_to_the_approved_args(service: Service) -> None:
    """Only the approved (possibly edited) args can be claimed; other args change nothing."""
    request = await submit(service)
    edited = {"command": "rm -rf build/tmp", "cwd": "/srv"}
    await service.decide(request.id, {"type": "approve", "args": edited}, APPROVER)
    before = await snapshot(service, request.id)
    with pytest.raises(ArgsMismatch):
        await service.claim(request.id, ARGS, AGENT)
    with pytest.raises(ArgsMismatch):
        await service.claim(request.id, {**edited, "extra": True}, AGENT)
    assert await snapshot(service, request.id) == before
    key_order = {"cwd": "/srv", "command": "rm -rf build/tmp"}
    assert (await service.claim(request.id, key_order, AGENT)).status == "executing"


async def test_unapproved_calls_cannot_be_claimed(service: Service) -> None:
    """Pending, rejected and expired requests cannot be claimed."""
    pending = await submit(service)
    with pytest.raises(InvalidTransition):
        await service.claim(pending.id, ARGS, AGENT)
    await service.decide(pending.id, {"type": "reject", "reason": "no"}, APPROVER)
    with pytest.raises(InvalidTransition):
        await service.claim(pending.id, ARGS, AGENT)


async def test_bad_input_changes_nothing(service: Service) -> None:
    """Each kind of bad input raises its own error and leaves state untouched."""
    choice = await submit(
        service, kind="choice", prompt="Which?", options=["a", "b"], tool_name=None, tool_args=None
    )
    approval = await submit(service)
    before = [await snapshot(service, choice.id), await snapshot(service, approval.id)]
    with pytest.raises(RequestNotFound):
        await service.decide("req_nope", {"type": "approve"}, APPROVER)
    with pytest.raises(InvalidDecision, match="not allowed"):
        await service.decide(choice.id, {"type": "approve"}, APPROVER)
    with pytest.raises(InvalidDecision, match="not one of the options"):
        await service.decide(choice.id, {"type": "choose", "choice": "c"}, APPROVER)
    with pytest.raises(InvalidDecision):
        await service.decide(choice.id, {"type": "choose", "choices": ["a", "b"]}, APPROVER)
    with pytest.raises(InvalidDecision):
        await service.decide(approval.id, {"type": "teleport"}, APPROVER)
    with pytest.raises(InvalidDecision):
        await service.decide(approval.id, {"type": "respond", "feedback": ""}, APPROVER)
    with pytest.raises(NotAllowed):
        await service.decide(approval.id, {"type": "approve"}, AGENT)
    after = [await snapshot(service, choice.id), await snapshot(service, approval.id)]
    assert after == before
    await service.decide(approval.id, {"type": "reject", "reason": "no"}, APPROVER)
    finished = await snapshot(service, approval.id)
    with pytest.raises(InvalidTransition, match="not pending"):
        await service.decide(approval.id, {"type": "approve"}, APPROVER)
    assert await snapshot(service, approval.id) == finished


async def test_invalid_submissions_name_the_field(service: Service) -> None:
    """A malformed submit raises InvalidRequest naming what is wrong, and stores nothing."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"session_id": "s", "kind": "approval"}, "tool_name"),
        ({"session_id": "s", "kind": "choice", "prompt": "p", "options": []}, "option"),
        ({"session_id": "s", "kind": "choice", "prompt": "p", "options": ["a", "a"]}, "distinct"),
        ({"session_id": "s", "tool_name": "t", "options": ["a"]}, "options"),
        ({"session_id": "s", "tool_name": "t", "tool_args": "ls"}, "tool_args"),
        ({"session_id": "", "tool_name": "t"}, "session_id"),
        ({"session_id": "s", "tool_name": "t", "expires_in": -1}, "expires_in"),
        ({"session_id": "s", "tool_name": "t", "allowed_decisions": ["choose"]}, "allowed"),
        ({"session_id": "s", "tool_name": "t", "surprise": 1}, "surprise"),
    ]
    for body, word in cases:
        with pytest.raises(InvalidRequest, match=word):
            await service.submit(body, AGENT)
    assert await service.store.last_event_seq() == 0
    with pytest.raises(NotAllowed):
        await service.submit({"session_id": "s", "tool_name": "t"}, APPROVER)


async def test_decisions_per_kind(service: Service) -> None:
    """choose (single, multi, free text), answer and respond record what was decided."""
    single = await submit(
        service, kind="choice", prompt="p", options=["a", "b"], tool_name=None, tool_args=None
    )
    decided = await service.decide(single.id, {"type": "choose", "choice": "b"}, APPROVER)
    assert decided.status == "approved"
    assert decided.decision is not None and decided.decision.extra == {"choices": ["b"]}
    multi = await submit(
        service,
        kind="choice",
        prompt="p",
        options=["a", "b", "c"],
        multi_select=True,
        allow_other=True,
        tool_name=None,
        tool_args=None,
    )
    decided = await service.decide(multi.id, {"type": "choose", "choices": ["c", "mine"]}, BOB)
    assert decided.decision is not None and decided.decision.extra == {"choices": ["c", "mine"]}
    questions = await submit(
        service,
        kind="questions",
        tool_name=None,
        tool_args=None,
        questions=[{"id": "why", "text": "Why?", "required": True}, "When?"],
    )
    with pytest.raises(InvalidDecision, match="needs an answer"):
        await service.decide(questions.id, {"type": "answer", "answers": {"q2": "now"}}, APPROVER)
    with pytest.raises(InvalidDecision, match="unknown question"):
        await service.decide(questions.id, {"type": "answer", "answers": {"zz": "x"}}, APPROVER)
    answered = await service.decide(
        questions.id, {"type": "answer", "answers": {"why": "because"}, "feedback": "ok"}, APPROVER
    )
    assert answered.status == "approved"
    call = await submit(service)
    responded = await service.decide(call.id, {"type": "respond", "feedback": "use make"}, BOB)
    assert responded.status == "rejected"
    assert responded.decision is not None and responded.decision.decision.type == "respond"
    narrowed = await submit(service, allowed_decisions=["reject"])
    with pytest.raises(InvalidDecision, match="not allowed"):
        await service.decide(narrowed.id, {"type": "approve"}, APPROVER)


async def test_wait_is_woken_by_the_decision(service: Service) -> None:
    """wait returns as soon as another task decides, long before its timeout."""
    request = await submit(service)
    waiter = asyncio.create_task(service.wait(request.id, timeout=30))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await service.decide(request.id, {"type": "approve"}, APPROVER)
    decided = await asyncio.wait_for(waiter, timeout=5)
    assert decided.status == "approved"
    timed_out = await service.wait((await submit(service)).id, timeout=0.05)
    assert timed_out.status == "pending"


async def test_wait_applies_expiry_when_due(service: Service, clock: FakeClock) -> None:
    """A waiter sees an overdue request expire (rejected by default) without a sweeper."""
    request = await submit(service, expires_in=5)
    clock.advance(6)
    expired = await service.wait(request.id, timeout=1)
    assert expired.status == "expired"
    assert [e.action for e in await service.audit(request.id)] == ["submit", "expire"]


EXPIRY_POLICY = """
[tools]
need_approval = ["*"]
[expiry]
expires_in = 10
on_expire = "default"
[[rules]]
tool = "shell"
action = "ask"
name = "approve-shell-on-expiry"
on_expire = "approve"
"""


async def test_expiry_policies(store: Any, clock: FakeClock) -> None:
    """Policy's on_expire: reject expires; approve approves; default picks the default answer."""
    service = Service(store, policy=Policy.from_toml(EXPIRY_POLICY), clock=clock, read_file=None)
    rejecting = await submit(service, tool_name="other")
    approving = await submit(service, expires_in=100)
    assert approving.expiry_set_by == 'rules[0] "approve-shell-on-expiry" in <string>'
    choosing = await submit(
        service,
        kind="choice",
        prompt="p",
        options=["a", "b"],
        on_expire="default",
        default_choice="b",
        tool_name=None,
        tool_args=None,
    )
    answering = await submit(
        service,
        kind="questions",
        questions=["Q?"],
        on_expire="default",
        default_answers={"q1": "later"},
        tool_name=None,
        tool_args=None,
    )
    sooner = await submit(service, expires_in=5)
    assert sooner.on_expire == "reject" and "requester" in str(sooner.expiry_set_by)
    clock.advance(6)
    assert await service.expire_due() == 1
    assert (await service.get(sooner.id)).status == "expired"
    clock.advance(3)
    assert await service.expire_due() == 0
    clock.advance(2)
    assert await service.expire_due() == 4
    assert (await service.get(rejecting.id)).status == "expired"
    approved = await service.get(approving.id)
    assert approved.status == "approved"
    assert (await service.claim(approving.id, ARGS, AGENT)).status == "executing"
    chose = await service.get(choosing.id)
    assert chose.decision is not None and chose.decision.extra == {"choices": ["b"]}
    answered = await service.get(answering.id)
    assert answered.status == "approved" and answered.decision is not None
    assert answered.decision.decided_by == "expiry"
    with pytest.raises(InvalidTransition):
        await service.decide(rejecting.id, {"type": "approve"}, APPROVER)


async def test_decision_after_expiry_time_is_refused(service: Service, clock: FakeClock) -> None:
    """A decision arriving after the expiry time loses even if no sweeper ran."""
    request = await submit(service, expires_in=5)
    clock.advance(5)
    with pytest.raises(InvalidTransition):
        await service.decide(request.id, {"type": "approve"}, APPROVER)
    assert (await service.get(request.id)).status == "expired"


async def test_sweeper_expires_in_the_background(service: Service, clock: FakeClock) -> None:
    """The background sweeper expires overdue requests on its own."""
    request = await submit(service, expires_in=1)
    clock.advance(2)
    service.start_sweeper(interval=0.01)
    for _ in range(200):
        if (await service.get(request.id)).status == "expired":
            break
        await asyncio.sleep(0.01)
    await service.stop_sweeper()
    assert (await service.get(request.id)).status == "expired"


async def test_sweeper_outlives_a_store_outage(
    service: Service, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweeper keeps running through StoreUnavailable and expires once the store is back."""
    request = await submit(service, expires_in=1)
    clock.advance(2)
    real = service.store.due_requests
    failures = [StoreUnavailable("down"), StoreUnavailable("still down")]

    async def flaky(now: datetime, limit: int) -> list[Request]:
        if failures:
            raise failures.pop()
        return await real(now, limit)

    monkeypatch.setattr(service.store, "due_requests", flaky)
    service.start_sweeper(interval=0.01)
    for _ in range(200):
        if (await service.get(request.id)).status == "expired":
            break
        await asyncio.sleep(0.01)
    await service.stop_sweeper()
    assert failures == []
    assert (await service.get(request.id)).status == "expired"


async def test_standing_grants(service: Service, clock: FakeClock) -> None:
    """session and always grants approve later matching calls at submit until revoked/expired."""
    first = await submit(service)
    await service.decide(first.id, {"type": "approve", "scope": "session"}, APPROVER)
    same_session = await submit(service, tool_args={"command": "ls"})
    assert same_session.status == "approved"
    assert same_session.grant_id is not None
    entry = (await service.audit(same_session.id))[-1]
    assert entry.actor == "grant" and entry.details["grant_id"] == same_session.grant_id
    assert (await submit(service, session_id="s2")).status == "pending"
    assert (await submit(service, tool_name="other")).status == "pending"
    grants = await service.list_grants()
    assert len(grants) == 1 and grants[0].scope == "session"
    await service.revoke_grant(grants[0].id, APPROVER)
    assert (await submit(service)).status == "pending"
    with pytest.raises(InvalidTransition):
        await service.revoke_grant(grants[0].id, APPROVER)
    with pytest.raises(GrantNotFound):
        await service.revoke_grant("grt_nope", APPROVER)
    with pytest.raises(NotAllowed):
        await service.revoke_grant(grants[0].id, AGENT)
    patterned = await submit(service, session_id="s3", tool_args={"path": "src/a.py"})
    await service.decide(
        patterned.id,
        {"type": "approve", "scope": "always", "args_pattern": {"path": "src/*"}},
        APPROVER,
    )
    assert (await submit(service, session_id="s4", tool_args={"path": "src/b.py"})).status == (
        "approved"
    )
    assert (await submit(service, session_id="s4", tool_args={"path": "/etc/x"})).status == (
        "pending"
    )
    clock.advance(31 * 24 * 3600)
    assert (await submit(service, session_id="s4", tool_args={"path": "src/c"})).status == (
        "pending"
    )
    assert await service.list_grants(live_only=True) == []


async def test_self_approval_and_designated_approvers(store: Any, clock: FakeClock) -> None:
    """The requester may not approve their own call; only designated approvers may decide."""
    policy = Policy.from_toml(
        '[tools]\nneed_approval = ["*"]\n[governance]\napprovers = ["alice", "root"]\n'
    )
    service = Service(store, policy=policy, clock=clock, read_file=None)
    own = (await service.submit({"session_id": "s", "tool_name": "t"}, ADMIN)).request
    with pytest.raises(NotAllowed, match="own request"):
        await service.decide(own.id, {"type": "approve"}, ADMIN)
    assert (
        await service.decide(own.id, {"type": "reject", "reason": "no"}, ADMIN)
    ).status == "rejected"
    other = (await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
    with pytest.raises(NotAllowed, match="designated"):
        await service.decide(other.id, {"type": "approve"}, BOB)
    assert (await service.decide(other.id, {"type": "approve"}, APPROVER)).status == "approved"


async def test_quorum_of_two(store: Any, clock: FakeClock) -> None:
    """Needing two approvals, a request stays pending after one; any reject ends it."""
    policy = Policy.from_toml('[governance]\nquorum = 2\n[tools]\nneed_approval = ["*"]\n')
    service = Service(store, policy=policy, clock=clock, read_file=None)
    events = CapturedEvents(service)
    request = (await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
    first = await service.decide(request.id, {"type": "approve"}, APPROVER)
    assert first.status == "pending" and len(first.votes) == 1
    with pytest.raises(NotAllowed, match="already approved"):
        await service.decide(request.id, {"type": "approve"}, APPROVER)
    with pytest.raises(InvalidDecision, match="same arguments"):
        await service.decide(request.id, {"type": "approve", "args": {"x": 1}}, BOB)
    second = await service.decide(request.id, {"type": "approve"}, BOB)
    assert second.status == "approved"
    assert [v.decided_by for v in second.votes] == ["alice", "bob"]
    assert events.types == ["created", "status", "decided"]
    other = (await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
    await service.decide(other.id, {"type": "approve"}, APPROVER)
    assert (
        await service.decide(other.id, {"type": "reject", "reason": "no"}, BOB)
    ).status == "rejected"


async def test_policy_decides_at_submit(store: Any, clock: FakeClock) -> None:
    """Policy deny rejects and allow approves at submit; the audit names the rule."""
    policy = Policy.from_toml(
        '[tools]\nneed_approval = ["shell"]\n'
        '[[rules]]\ntool = "shell"\nargs = { command = "rm *" }\naction = "deny"\nname = "no-rm"\n'
    )
    service = Service(store, policy=policy, clock=clock, read_file=None)
    denied = (
        await service.submit({"session_id": "s", "tool_name": "shell", "tool_args": ARGS}, AGENT)
    ).request
    assert denied.status == "rejected"
    assert "no-rm" in str((await service.audit(denied.id))[-1].details["policy"])
    allowed = (await service.submit({"session_id": "s", "tool_name": "read"}, AGENT)).request
    assert allowed.status == "approved"
    assert (await service.claim(allowed.id, {}, AGENT)).status == "executing"
    asked = (
        await service.submit(
            {"session_id": "s", "tool_name": "shell", "tool_args": {"command": "ls"}}, AGENT
        )
    ).request
    assert asked.status == "pending" and asked.policy_note is not None


async def test_cancel_fail_and_batch(service: Service) -> None:
    """cancel by the asker, fail after a claim, and decide_many with per-id outcomes."""
    mine = await submit(service)
    with pytest.raises(NotAllowed):
        await service.cancel(mine.id, BOB)
    assert (await service.cancel(mine.id, AGENT, "changed my mind")).status == "canceled"
    with pytest.raises(InvalidTransition):
        await service.cancel(mine.id, AGENT)
    run = await submit(service)
    await service.decide(run.id, {"type": "approve"}, APPROVER)
    await service.claim(run.id, ARGS, AGENT)
    failed = await service.fail(run.id, AGENT, "disk full")
    assert failed.status == "failed"
    with pytest.raises(InvalidTransition):
        await service.complete(run.id, AGENT)
    a, b = await submit(service), await submit(service)
    outcomes = await service.decide_many(
        [a.id, "req_missing", mine.id, b.id], {"type": "approve"}, APPROVER
    )
    by_id = {o.id: o for o in outcomes}
    assert by_id[a.id].status == "approved" and by_id[b.id].status == "approved"
    assert isinstance(by_id["req_missing"].error, RequestNotFound)
    assert isinstance(by_id[mine.id].error, InvalidTransition)
    with pytest.raises(InvalidDecision):
        await service.decide_many([a.id], {"type": "nope"}, APPROVER)


async def test_tokens_are_stored_hashed_and_authenticate(service: Service) -> None:
    """A created token authenticates as its principal; the store holds only its hash."""
    token, record = await service.create_token("ci-bot", "agent")
    assert token not in record.model_dump_json()
    principal = await service.authenticate(token)
    assert principal == Principal(name="ci-bot", role="agent")
    with pytest.raises(Unauthenticated):
        await service.authenticate(token + "x")
    with pytest.raises(InvalidRequest):
        await service.create_token("", "agent")


async def test_agents_see_only_their_own_requests(service: Service) -> None:
    """An agent cannot see another agent's request; approvers see all."""
    request = await submit(service)
    other = Principal(name="other-agent", role="agent")
    with pytest.raises(RequestNotFound):
        await service.get(request.id, other)
    assert (await service.get(request.id, APPROVER)).id == request.id
    from signoff.store.base import RequestQuery

    assert (await service.list_requests(RequestQuery(), other)).items == []
    assert len((await service.list_requests(RequestQuery(), AGENT)).items) == 1


async def test_failed_write_publishes_nothing(service: Service) -> None:
    """A losing concurrent decision emits no event: events follow commits only."""
    request = await submit(service)
    events = CapturedEvents(service)
    results = await asyncio.gather(
        service.decide(request.id, {"type": "approve"}, APPROVER),
        service.decide(request.id, {"type": "reject", "reason": "no"}, BOB),
        return_exceptions=True,
    )
    assert sum(isinstance(r, SignoffError) for r in results) == 1
    assert events.types == ["decided"]


async def test_governance_applies_to_choice_and_questions(store: Any, clock: FakeClock) -> None:
    """The policy's [governance] table governs choice and questions requests too."""
    policy = Policy.from_toml('[governance]\napprovers = ["alice"]\nquorum = 1\n')
    service = Service(store, policy=policy, clock=clock, read_file=None)
    body = {"session_id": "s", "kind": "choice", "prompt": "p", "options": ["a"]}
    choice = (await service.submit(body, AGENT)).request
    assert choice.approvers == ("alice",)
    with pytest.raises(NotAllowed):
        await service.decide(choice.id, {"type": "choose", "choice": "a"}, BOB)
    assert (
        await service.decide(choice.id, {"type": "choose", "choice": "a"}, APPROVER)
    ).status == ("approved")


async def test_an_agent_runs_only_its_own_calls(service: Service) -> None:
    """Another agent cannot claim or report a call (404, as over HTTP); an admin can."""
    other = Principal(name="other-bot", role="agent")
    made = await service.submit({"session_id": "s", "tool_name": "t", "tool_args": ARGS}, AGENT)
    request_id = made.request.id
    await service.decide(request_id, {"type": "approve"}, APPROVER)
    with pytest.raises(RequestNotFound):
        await service.claim(request_id, ARGS, other)
    claimed = await service.claim(request_id, ARGS, ADMIN)
    assert claimed.status == "executing"
    for report in (service.complete(request_id, other, "x"), service.fail(request_id, other, "x")):
        with pytest.raises(RequestNotFound):
            await report
    assert (await service.complete(request_id, AGENT, "ok")).status == "completed"


# -- leases: no call left executing ------------------------------------------------------


async def claimed_call(service: Service, lease: float | None = None) -> Request:
    """A shell call submitted, approved and claimed by the test agent."""
    request = await submit(service)
    await service.decide(request.id, {"type": "approve"}, APPROVER)
    return await service.claim(request.id, ARGS, AGENT, lease=lease)


async def test_a_claim_whose_lease_ends_is_failed_by_the_sweeper_and_never_rerun(
    service: Service, clock: FakeClock
) -> None:
    """Executing past its lease: failed by system via lease (event result), never claimable."""
    claimed = await claimed_call(service)
    assert isinstance(claimed, ApprovalRequest) and claimed.claimed_at is not None
    assert claimed.lease_until == claimed.claimed_at + timedelta(seconds=DEFAULT_LEASE)
    clock.advance(DEFAULT_LEASE - 1)
    assert await service.expire_due() == 0
    assert (await service.get(claimed.id)).status == "executing"
    events = CapturedEvents(service)
    clock.advance(1)
    assert await service.expire_due() == 1
    failed = await service.get(claimed.id)
    assert failed.status == "failed" and isinstance(failed, ApprovalRequest)
    assert failed.result is not None and failed.result.error == LEASE_LAPSED
    assert (failed.result.ok, failed.result.reported_by) == (False, "system")
    assert events.types == ["result"]
    last = (await service.audit(claimed.id))[-1]
    assert (last.action, last.actor, last.from_status, last.to_status) == (
        "fail",
        "system",
        "executing",
        "failed",
    )
    assert last.details["via"] == "lease" and last.details["error"] == LEASE_LAPSED
    for again in (
        service.claim(claimed.id, ARGS, AGENT),
        service.complete(claimed.id, AGENT, "ran after all"),
        service.renew(claimed.id, AGENT),
    ):
        with pytest.raises(InvalidTransition):
            await again
    assert await service.expire_due() == 0
    assert (await service.verify_audit()).ok


async def test_renewing_extends_the_lease_for_its_claimant_only(
    service: Service, clock: FakeClock
) -> None:
    """Only the claimant renews; a renewal moves the lease end, so the sweeper leaves it."""
    claimed = await claimed_call(service, lease=10)
    clock.advance(8)
    before = await snapshot(service, claimed.id)
    for who, refused in ((ADMIN, NotAllowed), (APPROVER, NotAllowed), (BOB, NotAllowed)):
        with pytest.raises(refused):
            await service.renew(claimed.id, who)
    other_agent = Principal(name="other-bot", role="agent")
    with pytest.raises(RequestNotFound):
        await service.renew(claimed.id, other_agent)
    assert await snapshot(service, claimed.id) == before
    renewed = await service.renew(claimed.id, AGENT, lease=10)
    assert isinstance(renewed, ApprovalRequest) and renewed.status == "executing"
    assert renewed.lease_until == clock() + timedelta(seconds=10)
    assert (await service.audit(claimed.id))[-1].action == "renew"
    clock.advance(8)  # 16 s after the claim, 8 s into the renewed lease
    assert await service.expire_due() == 0
    assert (await service.complete(claimed.id, AGENT, "done")).status == "completed"


async def test_a_report_after_the_lease_ended_finds_the_call_failed(
    service: Service, clock: FakeClock
) -> None:
    """A result or renewal arriving after the lease ended is refused, the sweep not awaited."""
    claimed = await claimed_call(service, lease=5)
    clock.advance(5)
    with pytest.raises(InvalidTransition):
        await service.complete(claimed.id, AGENT, "late")
    failed = await service.get(claimed.id)
    assert failed.status == "failed" and isinstance(failed, ApprovalRequest)
    assert failed.result is not None and failed.result.error == LEASE_LAPSED
    with pytest.raises(InvalidTransition):
        await service.renew(claimed.id, AGENT)


@pytest.mark.parametrize("lease", [0.5, 3601, float("nan"), float("inf"), -1])
async def test_a_lease_out_of_bounds_is_refused_and_changes_nothing(
    service: Service, lease: float
) -> None:
    """A claim or renewal lease outside 1 to 3600 seconds is InvalidRequest; nothing changes."""
    request = await submit(service)
    await service.decide(request.id, {"type": "approve"}, APPROVER)
    before = await snapshot(service, request.id)
    with pytest.raises(InvalidRequest):
        await service.claim(request.id, ARGS, AGENT, lease=lease)
    assert await snapshot(service, request.id) == before
    await service.claim(request.id, ARGS, AGENT, lease=MAX_LEASE)
    before = await snapshot(service, request.id)
    with pytest.raises(InvalidRequest):
        await service.renew(request.id, AGENT, lease=lease)
    assert await snapshot(service, request.id) == before
