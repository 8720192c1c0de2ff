"""The store contract, run against every backend (the ``store`` fixture is parametrized)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from signoff.domain.audit import AuditDraft, verify_chain
from signoff.domain.events import EventDraft
from signoff.domain.grants import Grant
from signoff.domain.principals import TokenRecord
from signoff.domain.requests import (
    ApprovalRequest,
    ChoiceRequest,
    Question,
    QuestionsRequest,
    Request,
    new_request_id,
)
from signoff.domain.sessions import SessionRecord
from signoff.domain.tasks import HistoryItem, PendingCall, Task, new_task_id
from signoff.errors import InvalidRequest
from signoff.store.base import (
    DuplicateRequest,
    GrantsChanged,
    RequestQuery,
    Store,
    VersionConflict,
    Write,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def approval(**over: Any) -> ApprovalRequest:
    """An approval request with sensible defaults."""
    fields: dict[str, Any] = {
        "id": new_request_id(),
        "session_id": "s1",
        "requested_by": "agent",
        "created_at": T0,
        "updated_at": T0,
        "allowed_decisions": ("approve", "reject", "respond"),
        "tool_name": "shell",
        "tool_args": {"command": "ls", "n": 1},
    }
    fields.update(over)
    return ApprovalRequest(**fields)


def insert(request: Request, at: datetime = T0) -> Write:
    """A write that inserts ``request`` with one audit entry and one event."""
    return Write(
        at=at,
        insert=request,
        audit=(AuditDraft(action="submit", actor="agent", request_id=request.id),),
        events=(EventDraft(type="created", request=request),),
    )


def task(**over: Any) -> Task:
    """A running task with sensible defaults."""
    fields: dict[str, Any] = {
        "id": new_task_id(),
        "agent": "helper",
        "session_id": "s1",
        "user": "alice",
        "created_at": T0,
        "updated_at": T0,
        "prompt": "Tidy the repo.",
    }
    fields.update(over)
    return Task(**fields)


def pending(*request_ids: str) -> tuple[PendingCall, ...]:
    """Pending shell calls, one per request id."""
    return tuple(
        PendingCall(
            tool_call_id=f"call-{n}", tool_name="shell", args={"command": "rm x"}, request_id=rid
        )
        for n, rid in enumerate(request_ids)
    )


def next_version(current: Task, **over: Any) -> Task:
    """``current`` changed by ``over`` as its next version."""
    return current.model_copy(update={"version": current.version + 1, **over})


async def test_all_three_kinds_round_trip(store: Store) -> None:
    """Every kind of request comes back exactly as it was stored."""
    choice = ChoiceRequest(
        id=new_request_id(),
        session_id="s",
        requested_by="a",
        created_at=T0,
        updated_at=T0,
        allowed_decisions=("choose", "reject"),
        prompt="Which?",
        options=("a", "b"),
        multi_select=True,
        allow_other=True,
        expires_at=T0 + timedelta(seconds=5),
    )
    questions = QuestionsRequest(
        id=new_request_id(),
        session_id="s",
        requested_by="a",
        created_at=T0,
        updated_at=T0,
        allowed_decisions=("approve", "answer", "reject"),
        questions=(Question(id="q1", text="Why?", required=True),),
        context={"k": [1, "v"]},
    )
    for request in (approval(), choice, questions):
        await store.commit(insert(request))
        assert await store.get_request(request.id) == request
    assert await store.get_request("req_missing") is None


async def test_duplicate_call_id_and_idempotency_key_are_refused(store: Store) -> None:
    """A second insert with the same (session, tool_call_id) or (requester, key) names the first."""
    first = approval(tool_call_id="call-1")
    await store.commit(insert(first))
    with pytest.raises(DuplicateRequest) as caught:
        await store.commit(insert(approval(tool_call_id="call-1")))
    assert caught.value.existing_id == first.id
    keyed = approval(idempotency_key="k1")
    await store.commit(insert(keyed))
    with pytest.raises(DuplicateRequest) as caught:
        await store.commit(insert(approval(idempotency_key="k1", session_id="other")))
    assert caught.value.existing_id == keyed.id
    await store.commit(insert(approval(tool_call_id="call-1", session_id="s2")))
    found = await store.find_duplicate(
        session_id="s1", tool_call_id="call-1", requested_by="agent", idempotency_key=None
    )
    assert found is not None and found.id == first.id
    assert len(await store.list_audit()) == 3


async def test_call_ids_and_keys_are_each_requesters_own(store: Store) -> None:
    """Two requesters may both use one (session, tool_call_id) and key; each finds only its own."""
    mine = approval(tool_call_id="call-1", idempotency_key="k1", requested_by="alice")
    theirs = approval(tool_call_id="call-1", idempotency_key="k1", requested_by="bob")
    await store.commit(insert(mine))
    await store.commit(insert(theirs))
    for requester, own in (("alice", mine), ("bob", theirs)):
        for call, key in (("call-1", None), (None, "k1"), ("call-1", "k1")):
            found = await store.find_duplicate(
                session_id="s1", tool_call_id=call, requested_by=requester, idempotency_key=key
            )
            assert found is not None and found.id == own.id
        with pytest.raises(DuplicateRequest) as caught:
            await store.commit(insert(approval(tool_call_id="call-1", requested_by=requester)))
        assert caught.value.existing_id == own.id
    nobody = await store.find_duplicate(
        session_id="s1", tool_call_id="call-1", requested_by="carol", idempotency_key="k1"
    )
    assert nobody is None
    assert len(await store.list_audit()) == 2


async def test_conditional_update_wins_once_and_stale_version_conflicts(store: Store) -> None:
    """An update applies only on the version it was made from; a stale one changes nothing."""
    request = approval()
    await store.commit(insert(request))
    newer = request.model_copy(update={"status": "rejected", "version": 2})
    await store.commit(Write(at=T0, update=newer))
    stale = request.model_copy(update={"status": "approved", "version": 2})
    with pytest.raises(VersionConflict):
        await store.commit(
            Write(
                at=T0,
                update=stale,
                audit=(AuditDraft(action="x", actor="y"),),
                events=(EventDraft(type="status", request=stale),),
            )
        )
    assert (await store.get_request(request.id)) == newer
    assert len(await store.list_audit()) == 1
    assert await store.last_event_seq() == 1


async def test_concurrent_writes_fail_alone(store: Store) -> None:
    """Of 20 concurrent writes, exactly the stale ones fail and the rest all commit."""
    requests = [approval() for _ in range(20)]
    for r in requests:
        await store.commit(insert(r))
    writes = []
    for n, r in enumerate(requests):
        version = 2 if n % 3 else 5  # every third one is stale
        changed = r.model_copy(update={"status": "rejected", "version": version})
        writes.append(
            store.commit(
                Write(
                    at=T0,
                    update=changed,
                    audit=(AuditDraft(action="decide", actor="a", request_id=r.id),),
                    events=(EventDraft(type="decided", request=changed),),
                )
            )
        )
    results = await asyncio.gather(*writes, return_exceptions=True)
    failed = [n for n, res in enumerate(results) if isinstance(res, Exception)]
    assert failed == [n for n in range(20) if n % 3 == 0]
    assert all(isinstance(results[n], VersionConflict) for n in failed)
    statuses = [(await store.get_request(r.id)).status for r in requests]  # type: ignore[union-attr]
    assert statuses == ["pending" if n % 3 == 0 else "rejected" for n in range(20)]
    report = verify_chain(await store.list_audit(), head=await store.audit_head())
    assert report.ok and report.entries == 20 + 13
    events = await store.list_events()
    assert [e.seq for e in events] == list(range(1, 34))


async def test_keyset_pagination_with_tied_timestamps(store: Store) -> None:
    """25 rows with equal created_at page newest first, ties by id, no gaps or repeats."""
    ids = []
    for n in range(25):
        r = approval(session_id="a" if n % 2 else "b", created_at=T0 + timedelta(seconds=n // 10))
        ids.append((r.created_at, r.id))
        await store.commit(insert(r))
    expected = [i for _, i in sorted(ids, reverse=True)]
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_requests(RequestQuery(limit=7, cursor=cursor))
        seen += [r.id for r in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == expected
    only_a = await store.list_requests(RequestQuery(session_id="a", status="pending", limit=100))
    assert len(only_a.items) == 12 and only_a.next_cursor is None
    assert (await store.list_requests(RequestQuery(kind="choice"))).items == []
    with pytest.raises(InvalidRequest):
        await store.list_requests(RequestQuery(cursor="%%%not-a-cursor"))


async def test_due_requests_are_pending_and_past_expiry(store: Store) -> None:
    """Only pending requests whose expiry has passed are due, earliest first."""
    late = approval(expires_at=T0 + timedelta(seconds=10))
    early = approval(expires_at=T0 + timedelta(seconds=5))
    never = approval()
    done = approval(expires_at=T0, status="rejected")
    for r in (late, early, never, done):
        await store.commit(insert(r))
    due = await store.due_requests(T0 + timedelta(seconds=10))
    assert [r.id for r in due] == [early.id, late.id]
    assert await store.due_requests(T0 + timedelta(seconds=1)) == []


async def test_lapsed_claims_are_executing_past_their_lease(store: Store) -> None:
    """Only executing calls whose lease ended are lapsed, earliest lease first, up to limit."""

    def executing(lease_s: int | None, status: str = "executing") -> ApprovalRequest:
        lease = T0 + timedelta(seconds=lease_s) if lease_s is not None else None
        return approval(status=status, claimed_by="agent", claimed_at=T0, lease_until=lease)

    late, early, later = executing(10), executing(5), executing(60)
    unleased, done, waiting = executing(None), executing(1, "completed"), approval()
    for r in (late, early, later, unleased, done, waiting):
        await store.commit(insert(r))
    lapsed = await store.lapsed_claims(T0 + timedelta(seconds=10))
    assert [r.id for r in lapsed] == [early.id, late.id]
    assert [r.id for r in await store.lapsed_claims(T0 + timedelta(seconds=60), limit=1)] == [
        early.id
    ]
    assert await store.lapsed_claims(T0 + timedelta(seconds=4)) == []


async def test_grants_and_tokens_round_trip_and_replace(store: Store) -> None:
    """Grants and tokens are stored, found (tokens by hash and by id) and replaced by id."""
    grant = Grant(
        id="grt_1",
        scope="session",
        tool_name="shell",
        session_id="s1",
        requested_by="agent",
        created_by="alice",
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
        source_request_id="req_x",
    )
    token = TokenRecord(id="tok_1", name="bot", role="agent", token_hash="ab" * 32, created_at=T0)
    await store.commit(Write(at=T0, grants=(grant,), tokens=(token,)))
    assert await store.get_grant("grt_1") == grant
    assert await store.list_grants(tool_name="shell", requested_by="agent") == [grant]
    assert await store.list_grants(tool_name="other") == []
    revoked = grant.model_copy(update={"revoked_at": T0, "revoked_by": "alice"})
    await store.commit(Write(at=T0, grants=(revoked,)))
    assert await store.list_grants() == [revoked]
    assert await store.find_token("ab" * 32) == token
    assert await store.find_token("cd" * 32) is None
    assert await store.get_token("tok_1") == token
    assert await store.get_token("tok_2") is None
    assert await store.list_tokens() == [token]


def shell_grant(**over: Any) -> Grant:
    """A live grant of ``shell`` calls by ``agent`` in session s1."""
    fields: dict[str, Any] = {
        "id": "grt_1",
        "scope": "session",
        "tool_name": "shell",
        "session_id": "s1",
        "requested_by": "agent",
        "created_by": "alice",
        "created_at": T0,
        "expires_at": T0 + timedelta(hours=1),
        "source_request_id": "req_x",
    }
    fields.update(over)
    return Grant(**fields)


async def test_a_request_decided_against_grants_since_changed_stores_nothing(
    store: Store,
) -> None:
    """Each write that stores a grant moves the grants version on; a new request carrying an
    older version is refused with GrantsChanged and leaves nothing behind (no row, entry or
    event), in one statement or in a transaction with other rows; the current one stores."""
    empty = await store.grants_for("shell", "agent")
    assert empty.grants == ()
    grant = shell_grant()
    other = shell_grant(id="grt_2", requested_by="other")
    await store.commit(Write(at=T0, grants=(grant, other)))
    read = await store.grants_for("shell", "agent")
    assert read.grants == (grant,) and read.version != empty.version
    assert (await store.grants_for("shell", "nobody")).grants == ()
    assert (await store.grants_for("shell", "nobody")).version == read.version
    token = TokenRecord(id="tok_1", name="bot", role="agent", token_hash="ab" * 32, created_at=T0)
    for stale in (
        replace(insert(approval()), grants_version=empty.version),
        replace(insert(approval()), grants_version=empty.version, tokens=(token,)),
    ):
        with pytest.raises(GrantsChanged):
            await store.commit(stale)
        assert stale.insert is not None and await store.get_request(stale.insert.id) is None
    assert await store.get_token("tok_1") is None
    assert await store.list_audit() == [] and await store.list_events() == []
    current = approval()
    await store.commit(replace(insert(current), grants_version=read.version))
    assert await store.get_request(current.id) == current
    await store.commit(replace(insert(approval()), grants_version=read.version, tokens=(token,)))
    assert await store.get_token("tok_1") == token
    revoked = grant.model_copy(update={"revoked_at": T0, "revoked_by": "alice"})
    drafts = (AuditDraft(action="grant.revoke", actor="alice", request_id="req_x"),)
    await store.commit(Write(at=T0, grants=(revoked,), audit=drafts))
    with pytest.raises(GrantsChanged):
        await store.commit(replace(insert(approval()), grants_version=read.version))
    after = await store.grants_for("shell", "agent")
    assert after.grants == (revoked,) and after.version not in (empty.version, read.version)
    await store.commit(replace(insert(approval()), grants_version=after.version))
    assert verify_chain(await store.list_audit()).entries == 4


async def test_sessions_round_trip_and_end_by_replacing(store: Store) -> None:
    """An inbox session is found by its id; ending it replaces it by id; others stay apart."""
    session = SessionRecord(
        id="ab" * 32, token_id="tok_1", created_at=T0, expires_at=T0 + timedelta(hours=12)
    )
    other = session.model_copy(update={"id": "cd" * 32})
    await store.commit(Write(at=T0, sessions=(session, other)))
    assert await store.get_session("ab" * 32) == session
    assert await store.get_session("ef" * 32) is None
    ended = session.model_copy(update={"ended_at": T0 + timedelta(minutes=5)})
    await store.commit(Write(at=T0, sessions=(ended,)))
    assert await store.get_session("ab" * 32) == ended
    assert await store.get_session("cd" * 32) == other
    assert not ended.live(T0 + timedelta(minutes=6)) and other.live(T0 + timedelta(minutes=6))


async def test_audit_chain_and_event_log(store: Store) -> None:
    """Audit entries chain and verify; events are numbered in commit order and replayable."""
    assert await store.audit_head() is None
    requests = [approval() for _ in range(5)]
    for n, r in enumerate(requests):
        await store.commit(insert(r, at=T0 + timedelta(seconds=n, microseconds=n)))
    entries = await store.list_audit()
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert verify_chain(entries, head=await store.audit_head()).ok
    assert [e.request_id for e in await store.list_audit(request_id=requests[2].id)] == [
        requests[2].id
    ]
    events = await store.list_events(after_seq=2, limit=2)
    assert [(e.seq, e.request.id) for e in events] == [(3, requests[2].id), (4, requests[3].id)]
    assert await store.last_event_seq() == 5


async def test_audit_coverage_names_what_the_log_does_not_account_for(store: Store) -> None:
    """Coverage counts requests and events and names requests, submit entries and events that
    have no counterpart, a sample of at most ``sample`` each."""
    empty = await store.audit_coverage()
    assert (empty.requests, empty.events, empty.last_event_seq) == (0, 0, None)
    assert not (empty.unaudited_requests or empty.orphan_events or empty.unannounced_requests)
    assert empty.event_head in (None, 0)
    audited = [approval() for _ in range(3)]
    for r in audited:
        await store.commit(insert(r))
    silent = [approval() for _ in range(3)]  # inserted and announced with no submit entry
    for r in silent:
        await store.commit(Write(at=T0, insert=r, events=(EventDraft(type="created", request=r),)))
    ghost = AuditDraft(action="submit", actor="agent", request_id="req_gone")
    await store.commit(Write(at=T0, audit=(ghost, AuditDraft(action="token.create", actor="a"))))
    quiet = audited[1].model_copy(update={"status": "rejected", "version": 2})
    await store.commit(Write(at=T0, update=quiet))  # its newest version has no event
    coverage = await store.audit_coverage(sample=2)
    assert coverage.requests == 6 and coverage.events == 6
    assert coverage.unannounced_requests == (quiet.id,)
    assert (coverage.first_event_seq, coverage.last_event_seq) == (1, 6)
    assert coverage.event_head in (None, 6)
    assert coverage.unaudited_requests == tuple(sorted(r.id for r in silent)[:2])
    assert coverage.unknown_requests == ("req_gone",)
    assert coverage.orphan_events == (4, 5)
    full = await store.audit_coverage()
    assert set(full.unaudited_requests) == {r.id for r in silent}
    assert full.orphan_events == (4, 5, 6)


async def test_audit_coverage_reads_events_with_a_nul_in_their_args(store: Store) -> None:
    """An agent's NUL in tool args (and the text backslash-u0000 beside it) leaves coverage
    readable and right: PostgreSQL's jsonb refuses the escape \\u0000."""
    args = {"nul": "a\x00b", "text": "\\u0000", "both": "\\\x00"}
    request = approval(tool_args=args)
    await store.commit(insert(request))
    newer = request.model_copy(update={"status": "rejected", "version": 2})
    await store.commit(
        Write(at=T0, update=newer, events=(EventDraft(type="status", request=newer),))
    )
    coverage = await store.audit_coverage()
    assert coverage.requests == 1 and coverage.events == 2
    assert not (coverage.unannounced_requests or coverage.unaudited_requests)
    stored = await store.get_request(request.id)
    assert isinstance(stored, ApprovalRequest) and stored.tool_args == args


async def test_task_round_trips_and_is_found_by_each_pending_request(store: Store) -> None:
    """A stored task reads back equal, by id and by every request it waits on."""
    at = T0 + timedelta(microseconds=123)
    paused = task(
        status="Paused",
        created_at=at,
        updated_at=at,
        messages='[{"kind": "request"}]',
        pending=pending("req_a", "req_b"),
        history=(
            HistoryItem(kind="user", at=at, text="Tidy the repo.", by="alice"),
            HistoryItem(
                kind="tool_call",
                at=at,
                tool_name="shell",
                tool_call_id="call-0",
                args={"command": "rm x", "force": True, "n": [1, 2.5, None]},
                request_id="req_a",
            ),
        ),
        output={"kept": [1, "two", None]},
    )
    await store.commit(Write(at=T0, task=paused))
    assert await store.get_task(paused.id) == paused
    assert await store.find_task("req_a") == paused
    assert await store.find_task("req_b") == paused
    assert await store.find_task("req_missing") is None
    assert await store.get_task("task_missing") is None


async def test_task_update_applies_on_next_version_and_stale_conflicts(store: Store) -> None:
    """A task update applies only on the version it was made from; a stale one changes nothing."""
    first = task()
    await store.commit(Write(at=T0, task=first))
    paused = next_version(first, status="Paused", pending=pending("req_a"))
    await store.commit(Write(at=T0, task=paused))
    assert await store.get_task(first.id) == paused
    stale = next_version(first, status="Failed", error="late")
    with pytest.raises(VersionConflict):
        await store.commit(
            Write(
                at=T0,
                task=stale,
                audit=(AuditDraft(action="task", actor="alice"),),
                events=(EventDraft(type="created", request=approval()),),
            )
        )
    with pytest.raises(VersionConflict):
        await store.commit(Write(at=T0, task=first.model_copy(update={"prompt": "again"})))
    with pytest.raises(VersionConflict):
        await store.commit(Write(at=T0, task=next_version(task())))
    assert await store.get_task(first.id) == paused
    assert await store.list_audit() == []
    assert await store.last_event_seq() == 0
    assert len(await store.list_tasks()) == 1


async def test_task_is_all_or_nothing_with_the_rest_of_its_write(store: Store) -> None:
    """A task commits with the requests and audit of its write, and not when they fail."""
    request = approval()
    started = task(status="Paused", pending=pending(request.id))
    await store.commit(
        Write(
            at=T0,
            insert=request,
            task=started,
            audit=(AuditDraft(action="submit", actor="agent", request_id=request.id),),
        )
    )
    assert await store.get_request(request.id) == request
    assert await store.find_task(request.id) == started
    stale_request = request.model_copy(update={"status": "approved", "version": 5})
    orphan = task(pending=pending("req_orphan"))
    with pytest.raises(VersionConflict):
        await store.commit(Write(at=T0, update=stale_request, task=orphan))
    assert await store.get_task(orphan.id) is None
    assert await store.find_task("req_orphan") is None
    assert len(await store.list_audit()) == 1


async def test_concurrent_task_writes_fail_alone(store: Store) -> None:
    """Of 12 concurrent task updates, exactly the stale ones fail and the rest all commit."""
    tasks = [task() for _ in range(12)]
    for t in tasks:
        await store.commit(Write(at=T0, task=t))
    writes = []
    for n, t in enumerate(tasks):
        changed = t.model_copy(update={"status": "Completed", "version": 2 if n % 3 else 4})
        writes.append(
            store.commit(
                Write(at=T0, task=changed, audit=(AuditDraft(action="done", actor="alice"),))
            )
        )
    results = await asyncio.gather(*writes, return_exceptions=True)
    failed = [n for n, res in enumerate(results) if isinstance(res, Exception)]
    assert failed == [0, 3, 6, 9]
    assert all(isinstance(results[n], VersionConflict) for n in failed)
    stored = [await store.get_task(t.id) for t in tasks]
    assert [s.status if s else None for s in stored] == [
        "Running" if n % 3 == 0 else "Completed" for n in range(12)
    ]
    report = verify_chain(await store.list_audit(), head=await store.audit_head())
    assert report.ok and report.entries == 8


async def test_list_tasks_newest_first_and_by_status(store: Store) -> None:
    """Tasks list newest first, ties broken by id descending, filtered by status and limited."""
    made = []
    for n in range(7):
        status = "Paused" if n % 2 else "Running"
        t = task(status=status, created_at=T0 + timedelta(seconds=n // 3))
        made.append(t)
        await store.commit(Write(at=T0, task=t))
    newest_first = sorted(made, key=lambda t: (t.created_at, t.id), reverse=True)
    assert await store.list_tasks() == newest_first
    assert await store.list_tasks(limit=3) == newest_first[:3]
    assert await store.list_tasks(status="Paused") == [
        t for t in newest_first if t.status == "Paused"
    ]
    assert await store.list_tasks(status="Completed") == []


async def test_updated_task_is_found_by_its_new_request_ids(store: Store) -> None:
    """After a task pauses again on new requests, each of them finds its latest version."""
    first = task(status="Paused", pending=pending("req_1"))
    await store.commit(Write(at=T0, task=first))
    running = next_version(first, status="Running", pending=())
    await store.commit(Write(at=T0, task=running))
    again = next_version(running, status="Paused", pending=pending("req_2", "req_3"))
    await store.commit(Write(at=T0, task=again))
    assert await store.find_task("req_2") == again
    assert await store.find_task("req_3") == again
    assert await store.find_task("req_1") == again
    other = task(status="Paused", pending=pending("req_3"))
    await store.commit(Write(at=T0, task=other))
    assert await store.find_task("req_3") == other
    assert await store.find_task("req_2") == again
