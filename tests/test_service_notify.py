"""Notification routes, person links and single-use keys are service operations for admins."""

from __future__ import annotations

from datetime import timedelta

import pytest

from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.errors import InvalidRequest, NotAllowed, RouteNotFound
from signoff.service import Service
from signoff.testing import ADMIN, AGENT, APPROVER, FakeClock, memory_service

HOOK = {"type": "webhook", "url": "http://127.0.0.1:9/hook"}
TOML = """
[[notify]]
name = "oncall"
channel = { type = "email", to = ["Oncall@Example.com"] }
"""


async def test_routes_are_added_listed_and_removed_with_audit(service: Service) -> None:
    """An admin's route is stored and audited; removal is audited too; names are unique."""
    added = await service.add_route({"name": "ops", "channel": HOOK}, ADMIN, allow_private=True)
    assert added.id.startswith("route_") and added.source == "api"
    with pytest.raises(InvalidRequest, match="exists"):
        await service.add_route({"name": "ops", "channel": HOOK}, ADMIN, allow_private=True)
    (status,) = await service.list_routes(ADMIN)
    assert status.route == added and not status.failing
    await service.remove_route("ops", ADMIN)
    assert await service.list_routes(ADMIN) == []
    actions = [e.action for e in await service.store.list_audit()]
    assert actions == ["notify.route.add", "notify.route.remove"]
    with pytest.raises(RouteNotFound):
        await service.remove_route("ops", ADMIN)


async def test_a_private_webhook_route_is_refused() -> None:
    """A route's webhook URL obeys the webhook rule: no private address unless allowed."""
    with pytest.raises(InvalidRequest, match=r"public"):
        await memory_service().add_route({"name": "ops", "channel": HOOK}, ADMIN)


@pytest.mark.parametrize("who", [AGENT, APPROVER], ids=["agent", "approver"])
async def test_only_admins_manage_routes_and_links(who: Principal) -> None:
    """Agents and approvers may not add, list or remove routes, nor link people."""
    service = memory_service()
    with pytest.raises(NotAllowed):
        await service.add_route({"name": "ops", "channel": HOOK}, who, allow_private=True)
    with pytest.raises(NotAllowed):
        await service.list_routes(who)
    with pytest.raises(NotAllowed):
        await service.remove_route("ops", who)
    with pytest.raises(NotAllowed):
        await service.link_person("slack", "U0ALICE", "alice", who)
    with pytest.raises(NotAllowed):
        await service.list_links(who)


async def test_tools_toml_routes_are_listed_read_only() -> None:
    """A tools.toml route is listed with its source, and can be neither shadowed nor removed."""
    service = memory_service(policy=Policy.from_toml(TOML))
    (status,) = await service.list_routes(ADMIN)
    assert status.route.source == "tools.toml"
    assert status.route.channel.model_dump()["to"] == ["oncall@example.com"]
    with pytest.raises(InvalidRequest, match=r"tools\.toml"):
        await service.remove_route("oncall", ADMIN)
    with pytest.raises(InvalidRequest, match=r"in tools\.toml"):
        await service.add_route({"name": "oncall", "channel": HOOK}, ADMIN, allow_private=True)
    spec = {"name": "ops", "channel": HOOK, "escalate_after": 60, "escalate_to": "oncall"}
    assert (await service.add_route(spec, ADMIN, allow_private=True)).escalate_to == "oncall"
    with pytest.raises(InvalidRequest, match="escalate_to names no route"):
        await service.add_route({**spec, "name": "x", "escalate_to": "nobody"}, ADMIN)


async def test_person_for_is_the_linked_decider(service: Service) -> None:
    """A linked Slack id or address is its person, as their live decider token makes them;
    unlinked, revoked or never a decider: None."""
    _, alice = await service.create_token("alice", "approver")
    await service.create_token("bot", "agent")
    with pytest.raises(InvalidRequest, match="no live approver or admin"):
        await service.link_person("slack", "U0BOT", "bot", ADMIN)
    await service.link_person("slack", "U0ALICE", "alice", ADMIN)
    await service.link_person("email", "Alice@Example.com", "alice", ADMIN)
    person = await service.person_for("slack", "U0ALICE")
    assert person is not None and (person.name, person.role) == ("alice", "approver")
    assert await service.person_for("email", "ALICE@example.com") == person
    assert await service.person_for("slack", "U0NOBODY") is None
    await service.revoke_token(alice.id, ADMIN)
    assert await service.person_for("slack", "U0ALICE") is None
    await service.unlink_person("email", "alice@example.com", ADMIN)
    assert [link.kind for link in await service.list_links(ADMIN)] == ["slack"]
    actions = [e.action for e in await service.store.list_audit()]
    assert actions.count("person.link") == 2 and actions.count("person.unlink") == 1


async def test_use_once(service: Service, clock: FakeClock) -> None:
    """A key is used once until its time ends."""
    until = clock() + timedelta(minutes=5)
    assert await service.use_once("slack:abc", until) is True
    assert await service.use_once("slack:abc", until) is False
    clock.advance(301)
    assert await service.use_once("slack:abc", clock() + timedelta(minutes=5)) is True
