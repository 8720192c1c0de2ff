"""One backend suite: every operation of ``Backend``, in this process and over HTTP.

Each test runs three times, through the ``team`` fixture: on ``LocalBackend`` (a service on
a SQLite file in ``tmp_path``), on ``AsyncClient`` against a real ``signoff serve`` (one
server for the module), and on the blocking ``Client`` against the same server, as
``as_backend`` offers it to async code (all but the event stream, which it does not have).
All must answer alike, refusals included: the same result, the same exception, whatever side
of the wire the caller is on.

The server is shared, so each test works in a session of its own and reads back only what
it made. It hosts an agent (``--agent``), so that its task routes answer; the tasks the
tests read are stored through a service on the server's own database, as a hosted run
stores them.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from signoff.backends import Backend, LocalBackend, as_backend
from signoff.bus.local import LocalBus
from signoff.client import AsyncClient, Client
from signoff.domain.principals import Principal, Role
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.tasks import Task
from signoff.errors import (
    ArgsMismatch,
    GrantNotFound,
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
    RequestNotFound,
    TaskNotFound,
    TokenNotFound,
)
from signoff.service import Service
from signoff.store.base import RequestQuery
from signoff.store.sqlite import SQLiteStore
from tests.serving import Server, free_port, new_token, start_server

AGENT, OTHER, APPROVER, ADMIN = "bot", "other-bot", "alice", "root"
"""The principals every test acts as: two agents, a person who decides, an admin."""

ROLES: dict[str, Role] = {AGENT: "agent", OTHER: "agent", APPROVER: "approver", ADMIN: "admin"}

HOSTED_AGENT = "deploy=tests.paths.hosted_agent:hosted"
"""An agent for the server to host, so that it serves tasks."""

PUBLIC_HOOK = "https://1.1.1.1/signoff-suite"
"""A public address (no name to resolve); nothing is sent to it: no event while it exists."""


@dataclass
class Team:
    """The same four principals on one kind of backend."""

    kind: str
    agent: Backend
    other: Backend
    approver: Backend
    admin: Backend
    store_task: Callable[[str], Awaitable[Task]]
    """Store a task of the hosted agent's, started by the named user (as a hosted run does)."""


@dataclass
class Served:
    """The module's ``signoff serve`` and a token for each principal."""

    server: Server
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One real server for the module, with the team's tokens created through its API."""
    tmp = tmp_path_factory.mktemp("suite")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp), "COLUMNS": "200"}
    db = f"sqlite:///{tmp / 'serve.db'}"
    server = start_server(db, free_port(), env, "--agent", HOSTED_AGENT)
    try:
        assert server.admin_token is not None
        tokens = {name: new_token(server, name, role)[0] for name, role in ROLES.items()}
        yield Served(server, tokens)
    finally:
        server.stop()


@pytest.fixture(params=["local", "http", "blocking"])
async def team(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Team]:
    """The team on ``LocalBackend`` (SQLite in ``tmp_path``), on ``AsyncClient``, or on the
    blocking ``Client`` through ``as_backend``."""
    if request.param == "local":
        async with _LocalTeam(tmp_path) as local:
            yield local
    else:
        served = request.getfixturevalue("served")
        async with _HttpTeam(served, blocking=request.param == "blocking") as remote:
            yield remote


class _LocalTeam:
    """The team as LocalBackends on one service, for ``async with``."""

    def __init__(self, tmp_path: Path) -> None:
        self.service = Service(SQLiteStore(tmp_path / "signoff.db"), bus=LocalBus(), read_file=None)

    async def __aenter__(self) -> Team:
        await self.service.open()
        as_ = {
            name: LocalBackend(self.service, Principal(name=name, role=role))
            for name, role in ROLES.items()
        }
        return Team("local", as_[AGENT], as_[OTHER], as_[APPROVER], as_[ADMIN], self.store_task)

    async def store_task(self, user: str) -> Task:
        return await self.service.create_task(agent="deploy", user=user, prompt="deploy")

    async def __aexit__(self, *_: object) -> None:
        await self.service.close()


class _HttpTeam:
    """The team as AsyncClients of the module's server, for ``async with``."""

    def __init__(self, served: Served, *, blocking: bool) -> None:
        base = served.server.base
        self.kind = "blocking" if blocking else "http"
        self.clients: dict[str, AsyncClient | Client] = {
            name: (Client if blocking else AsyncClient)(base, token)
            for name, token in served.tokens.items()
        }
        self.db = Path(served.server.db.removeprefix("sqlite:///"))

    async def __aenter__(self) -> Team:
        c = {name: as_backend(client) for name, client in self.clients.items()}
        return Team(self.kind, c[AGENT], c[OTHER], c[APPROVER], c[ADMIN], self.store_task)

    async def store_task(self, user: str) -> Task:
        service = Service(SQLiteStore(self.db), read_file=None, follow=False)
        async with service:
            return await service.create_task(agent="deploy", user=user, prompt="deploy")

    async def __aexit__(self, *_: object) -> None:
        for client in self.clients.values():
            if isinstance(client, Client):
                client.close()
            else:
                await client.aclose()


def new_session() -> str:
    """A session id no other test uses (the server is shared)."""
    return "suite-" + secrets.token_hex(6)


async def file_call(
    backend: Backend, session: str, args: dict[str, object] | None = None, **extra: object
) -> Request:
    """File an approval request for a ``deploy`` call."""
    body = {"session_id": session, "tool_name": "deploy", "tool_args": args or {"env": "prod"}}
    return (await backend.submit({**body, **extra})).request


async def approved_call(team: Team, session: str) -> Request:
    """A call of the agent's that the approver has approved."""
    request = await file_call(team.agent, session)
    return await team.approver.decide(request.id, {"type": "approve"})


def approval(request: Request) -> ApprovalRequest:
    """``request`` as the approval request it is (its claim, lease and result)."""
    assert isinstance(request, ApprovalRequest)
    return request


# -- requests ------------------------------------------------------------------------------


async def test_submit_files_once_per_call_id(team: Team) -> None:
    session = new_session()
    first = await team.agent.submit(
        {"session_id": session, "tool_name": "deploy", "tool_args": {}, "tool_call_id": "c1"}
    )
    again = await team.agent.submit(
        {"session_id": session, "tool_name": "deploy", "tool_args": {}, "tool_call_id": "c1"}
    )
    assert first.created and not again.created
    assert again.request.id == first.request.id
    assert first.request.status == "pending"
    assert first.request.requested_by == AGENT


async def test_submit_refuses_bad_input(team: Team) -> None:
    with pytest.raises(InvalidRequest):
        await team.agent.submit({"session_id": new_session(), "kind": "choice"})


async def test_a_person_may_not_submit(team: Team) -> None:
    with pytest.raises(NotAllowed):
        await file_call(team.approver, new_session())


async def test_get_shows_a_request_to_its_agent_and_to_people(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    assert (await team.agent.get(request.id)).id == request.id
    assert (await team.approver.get(request.id)).id == request.id


async def test_an_agent_may_not_see_another_agents_request(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    with pytest.raises(RequestNotFound):
        await team.other.get(request.id)
    with pytest.raises(RequestNotFound):
        await team.other.wait(request.id, 0)


async def test_get_of_an_unknown_id(team: Team) -> None:
    with pytest.raises(RequestNotFound):
        await team.approver.get("req_nothing_here")


async def test_list_shows_an_agent_only_its_own(team: Team) -> None:
    session = new_session()
    mine = await file_call(team.agent, session)
    theirs = await file_call(team.other, session)
    query = RequestQuery(session_id=session)
    assert [r.id for r in (await team.agent.list_requests(query)).items] == [mine.id]
    everyone = {r.id for r in (await team.approver.list_requests(query)).items}
    assert everyone == {mine.id, theirs.id}


async def test_list_pages_with_a_cursor(team: Team) -> None:
    session = new_session()
    filed = [await file_call(team.agent, session, {"n": n}) for n in range(3)]
    first = await team.agent.list_requests(RequestQuery(session_id=session, limit=2))
    assert len(first.items) == 2 and first.next_cursor is not None
    rest = await team.agent.list_requests(
        RequestQuery(session_id=session, limit=2, cursor=first.next_cursor)
    )
    assert {r.id for r in [*first.items, *rest.items]} == {r.id for r in filed}


# -- decisions -----------------------------------------------------------------------------


async def test_decide_approves_once(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    decided = await team.approver.decide(request.id, {"type": "approve"})
    assert decided.status == "approved"
    with pytest.raises(InvalidTransition):
        await team.approver.decide(request.id, {"type": "reject", "reason": "late"})


async def test_decide_rejects_with_the_reason(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    decided = await team.approver.decide(request.id, {"type": "reject", "reason": "not today"})
    assert decided.status == "rejected"
    assert decided.decision is not None and decided.decision.decided_by == APPROVER


async def test_an_agent_may_not_decide(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    with pytest.raises(NotAllowed):
        await team.agent.decide(request.id, {"type": "approve"})
    with pytest.raises(NotAllowed):
        await team.agent.decide_many([request.id], "approve")
    assert (await team.approver.get(request.id)).status == "pending"


async def test_preview_edit_previews_a_persons_edit_and_changes_nothing(team: Team) -> None:
    request = await file_call(team.agent, new_session(), {"path": "a.txt", "content": "old\n"})
    seen = await team.approver.preview_edit(request.id, {"path": "a.txt", "content": "new\n"})
    assert seen.preview is not None and "+new" in seen.preview.diff and seen.errors == []
    with pytest.raises(NotAllowed):
        await team.agent.preview_edit(request.id, {"path": "a.txt", "content": "x"})
    with pytest.raises(RequestNotFound):
        await team.approver.preview_edit("req_unknown", {})
    assert (await team.approver.get(request.id)).version == request.version
    await team.approver.decide(request.id, {"type": "approve"})
    with pytest.raises(InvalidTransition):
        await team.approver.preview_edit(request.id, {"path": "a.txt", "content": "y"})


async def test_decide_many_gives_each_id_its_outcome(team: Team) -> None:
    session = new_session()
    first, second = [await file_call(team.agent, session, {"n": n}) for n in range(2)]
    outcomes = await team.approver.decide_many(
        [first.id, second.id, "req_unknown"], "reject", "batch"
    )
    by_id = {o.id: o for o in outcomes}
    assert by_id[first.id].status == by_id[second.id].status == "rejected"
    assert isinstance(by_id["req_unknown"].error, RequestNotFound)


async def test_wait_returns_once_decided(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    assert (await team.agent.wait(request.id, 0)).status == "pending"
    waiting = asyncio.create_task(team.agent.wait(request.id, 30))
    await team.approver.decide(request.id, {"type": "approve"})
    assert (await waiting).status == "approved"


# -- running an approved call --------------------------------------------------------------


async def test_claim_renew_complete(team: Team) -> None:
    request = await approved_call(team, new_session())
    with pytest.raises(ArgsMismatch):
        await team.agent.claim(request.id, {"env": "staging"})
    claimed = approval(await team.agent.claim(request.id, {"env": "prod"}, lease=60))
    assert claimed.status == "executing"
    with pytest.raises(InvalidTransition):
        await team.agent.claim(request.id, {"env": "prod"})
    renewed = approval(await team.agent.renew(request.id, lease=120))
    assert renewed.status == "executing"
    assert renewed.lease_until is not None and claimed.lease_until is not None
    assert renewed.lease_until > claimed.lease_until
    done = approval(await team.agent.complete(request.id, {"deployed": True}))
    assert done.status == "completed"
    assert done.result is not None and done.result.ok
    assert done.result.result == {"deployed": True}


async def test_claim_then_fail(team: Team) -> None:
    request = await approved_call(team, new_session())
    await team.agent.claim(request.id, {"env": "prod"})
    failed = approval(await team.agent.fail(request.id, "disk full"))
    assert failed.status == "failed"
    assert failed.result is not None and failed.result.error == "disk full"


async def test_an_agent_may_not_run_another_agents_call(team: Team) -> None:
    request = await approved_call(team, new_session())
    with pytest.raises(RequestNotFound):
        await team.other.claim(request.id, {"env": "prod"})
    await team.agent.claim(request.id, {"env": "prod"})
    with pytest.raises(RequestNotFound):
        await team.other.renew(request.id)
    with pytest.raises(RequestNotFound):
        await team.other.complete(request.id)
    with pytest.raises(RequestNotFound):
        await team.other.fail(request.id, "sabotage")
    assert (await team.agent.get(request.id)).status == "executing"


async def test_a_call_not_approved_may_not_be_claimed(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    with pytest.raises(InvalidTransition):
        await team.agent.claim(request.id, {"env": "prod"})


# -- withdrawing ---------------------------------------------------------------------------


async def test_cancel_withdraws_a_pending_request(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    canceled = await team.agent.cancel(request.id, "changed my mind")
    assert canceled.status == "canceled"
    with pytest.raises(InvalidTransition):
        await team.agent.cancel(request.id)


async def test_an_agent_may_not_cancel_another_agents_request(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    with pytest.raises(RequestNotFound):
        await team.other.cancel(request.id)
    assert (await team.agent.get(request.id)).status == "pending"


# -- audit ---------------------------------------------------------------------------------


async def test_audit_of_one_request(team: Team) -> None:
    request = await approved_call(team, new_session())
    actions = [e.action for e in await team.agent.audit(request.id)]
    assert actions[0] == "submit" and "decide" in actions[-1]
    assert [e.action for e in await team.approver.audit(request.id)] == actions


async def test_an_agent_may_not_read_others_audit(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    with pytest.raises(RequestNotFound):
        await team.other.audit(request.id)
    with pytest.raises(NotAllowed):
        await team.agent.audit()


async def test_the_whole_audit_log_is_for_admins(team: Team) -> None:
    request = await file_call(team.agent, new_session())
    assert request.id in {e.request_id for e in await team.admin.audit()}
    with pytest.raises(NotAllowed):
        await team.approver.audit()


async def test_verify_audit_with_an_anchor(team: Team) -> None:
    await file_call(team.agent, new_session())
    anchor = await team.approver.audit_anchor()
    assert anchor.seq >= 1
    report = await team.admin.verify_audit(str(anchor))
    assert report.ok, report
    with pytest.raises(InvalidRequest):
        await team.admin.verify_audit("not an anchor")


async def test_verifying_and_anchoring_the_audit_log_are_refused_to_agents(team: Team) -> None:
    with pytest.raises(NotAllowed):
        await team.agent.verify_audit()
    with pytest.raises(NotAllowed):
        await team.approver.verify_audit()
    with pytest.raises(NotAllowed):
        await team.agent.audit_anchor()


# -- grants --------------------------------------------------------------------------------


async def test_a_session_grant_is_listed_and_revoked(team: Team) -> None:
    session = new_session()
    request = await file_call(team.agent, session)
    await team.approver.decide(request.id, {"type": "approve", "scope": "session"})
    grant = next(g for g in await team.approver.list_grants() if g.source_request_id == request.id)
    later = await file_call(team.agent, session)
    assert later.status == "approved"  # the grant decided it
    revoked = await team.approver.revoke_grant(grant.id)
    assert revoked.revoked_at is not None
    assert grant.id not in {g.id for g in await team.approver.list_grants()}
    assert grant.id in {g.id for g in await team.admin.list_grants(live_only=False)}
    with pytest.raises(InvalidTransition):
        await team.approver.revoke_grant(grant.id)
    assert (await file_call(team.agent, session, {"env": "other"})).status == "pending"


async def test_grants_are_for_people(team: Team) -> None:
    with pytest.raises(NotAllowed):
        await team.agent.list_grants()
    with pytest.raises(NotAllowed):
        await team.agent.revoke_grant("grt_unknown")
    with pytest.raises(GrantNotFound):
        await team.approver.revoke_grant("grt_unknown")


# -- tokens --------------------------------------------------------------------------------


async def test_an_admin_creates_lists_and_revokes_tokens(team: Team) -> None:
    name = "suite-" + secrets.token_hex(4)
    token, record = await team.admin.create_token(name, "approver")
    assert token and record.name == name and record.role == "approver"
    listed = {t.id: t for t in await team.admin.list_tokens()}
    assert listed[record.id].name == name
    revoked = await team.admin.revoke_token(record.id)
    assert revoked.revoked_at is not None
    with pytest.raises(InvalidTransition):
        await team.admin.revoke_token(record.id)
    with pytest.raises(TokenNotFound):
        await team.admin.revoke_token("tok_unknown")


@pytest.mark.parametrize("who", ["agent", "approver"])
async def test_tokens_are_for_admins(team: Team, who: str) -> None:
    backend: Backend = getattr(team, who)
    with pytest.raises(NotAllowed):
        await backend.create_token("sneaky", "admin")
    with pytest.raises(NotAllowed):
        await backend.list_tokens()
    with pytest.raises(NotAllowed):
        await backend.revoke_token("tok_unknown")


# -- events --------------------------------------------------------------------------------


def needs_events(team: Team) -> None:
    """Skip on the blocking client, which leaves the event stream to AsyncClient."""
    if team.kind == "blocking":
        pytest.skip("the blocking Client has no event stream")


async def test_events_replay_and_follow_a_session(team: Team) -> None:
    needs_events(team)
    session = new_session()
    request = await file_call(team.agent, session)
    seen: list[tuple[str, str]] = []

    async def read() -> None:
        async for event in team.approver.events(since=0, session_id=session):
            seen.append((event.type, event.request.status))
            if event.request.status == "approved":
                return

    reading = asyncio.create_task(read())
    await team.approver.decide(request.id, {"type": "approve"})
    await asyncio.wait_for(reading, 30)
    assert seen[0] == ("created", "pending")
    assert seen[-1] == ("decided", "approved")


async def test_an_agent_follows_only_its_own_requests(team: Team) -> None:
    needs_events(team)
    session = new_session()
    await file_call(team.other, session)
    mine = await file_call(team.agent, session)
    await team.approver.decide(mine.id, {"type": "approve"})
    ids: list[str] = []

    async def read() -> None:
        async for event in team.agent.events(since=0, session_id=session):
            ids.append(event.request.id)
            if event.request.status == "approved":
                return

    await asyncio.wait_for(read(), 30)
    assert set(ids) == {mine.id}


# -- webhooks (admins) ---------------------------------------------------------------------


async def test_an_admin_adds_lists_and_removes_a_webhook(team: Team) -> None:
    added = await team.admin.add_webhook(PUBLIC_HOOK, secret="s" * 32)
    try:
        assert added.url == PUBLIC_HOOK and added.format == "json"
        assert added.secret == "s" * 32
        listed = {w.id: w for w in await team.admin.list_webhooks()}
        assert listed[added.id].secret == "(hidden)"  # shown once, when added
    finally:
        removed = await team.admin.remove_webhook(added.id)
    assert removed.id == added.id and removed.secret == "(hidden)"
    assert added.id not in {w.id for w in await team.admin.list_webhooks() if w.active}


async def test_a_webhook_target_must_be_public(team: Team) -> None:
    with pytest.raises(InvalidRequest):
        await team.admin.add_webhook("http://127.0.0.1:9/hook")
    with pytest.raises(InvalidRequest):
        await team.admin.add_webhook("ftp://1.1.1.1/hook")
    with pytest.raises(InvalidRequest):
        await team.admin.add_webhook(PUBLIC_HOOK, fmt="xml")


async def test_the_delivery_log(team: Team) -> None:
    assert isinstance(await team.admin.list_deliveries(status="failed", limit=5), list)
    with pytest.raises(InvalidRequest):
        await team.admin.list_deliveries(status="lost")


async def test_unknown_webhooks_and_deliveries(team: Team) -> None:
    with pytest.raises(InvalidRequest):
        await team.admin.remove_webhook("whk_unknown")
    with pytest.raises(InvalidRequest):
        await team.admin.redeliver("dlv_unknown")


@pytest.mark.parametrize("who", ["agent", "approver"])
async def test_webhooks_are_for_admins(team: Team, who: str) -> None:
    backend: Backend = getattr(team, who)
    with pytest.raises(NotAllowed):
        await backend.add_webhook(PUBLIC_HOOK)
    with pytest.raises(NotAllowed):
        await backend.list_webhooks()
    with pytest.raises(NotAllowed):
        await backend.remove_webhook("whk_unknown")
    with pytest.raises(NotAllowed):
        await backend.list_deliveries()
    with pytest.raises(NotAllowed):
        await backend.redeliver("dlv_unknown")


# -- hosted tasks --------------------------------------------------------------------------


async def test_a_task_is_seen_by_its_user_and_by_people(team: Team) -> None:
    task = await team.store_task(AGENT)
    assert (await team.agent.get_task(task.id)).id == task.id
    assert (await team.approver.get_task(task.id)).user == AGENT
    assert task.id in {t.id for t in await team.agent.list_tasks()}
    assert task.id in {t.id for t in await team.admin.list_tasks(status="Running")}
    assert task.id not in {t.id for t in await team.agent.list_tasks(status="Completed")}


async def test_an_agent_may_not_see_another_users_task(team: Team) -> None:
    task = await team.store_task(AGENT)
    with pytest.raises(TaskNotFound):
        await team.other.get_task(task.id)
    assert task.id not in {t.id for t in await team.other.list_tasks()}


async def test_tasks_refuse_bad_input(team: Team) -> None:
    with pytest.raises(TaskNotFound):
        await team.admin.get_task("tsk_unknown")
    with pytest.raises(InvalidRequest):
        await team.admin.list_tasks(status="Sleeping")
