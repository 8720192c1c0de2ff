"""The notification tables of the store contract, run against every backend."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from signoff.domain.audit import AuditDraft
from signoff.domain.notify import (
    Notice,
    PersonLink,
    Route,
    WebhookTarget,
    new_notice_id,
    new_route_id,
)
from signoff.store.base import Store, Write

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def route(name: str = "ops", at: datetime = T0) -> Route:
    """A webhook route."""
    return Route(
        id=new_route_id(),
        name=name,
        channel=WebhookTarget(url="https://hooks.example.com/x"),
        created_by="root",
        created_at=at,
    )


def notice(route_id: str, request_id: str, due: datetime, **over: object) -> Notice:
    """A pending notice."""
    fields: dict[str, object] = {
        "id": new_notice_id(),
        "route_id": route_id,
        "request_id": request_id,
        "purpose": "new",
        "next_attempt_at": due,
        "created_at": due,
    }
    fields.update(over)
    return Notice.model_validate(fields)


async def test_routes_are_stored_replaced_and_removed(store: Store) -> None:
    """Routes come back oldest first; a removal deletes one and keeps its audit entry."""
    first, second = route("first"), route("second", T0 + timedelta(seconds=1))
    audit = (AuditDraft(action="notify.route.add", actor="root"),)
    await store.commit(Write(at=T0, routes=(first, second), audit=audit))
    assert [r.name for r in await store.list_routes()] == ["first", "second"]
    changed = first.model_copy(update={"tool": "deploy*"})
    await store.commit(Write(at=T0, routes=(changed,), removed_routes=(second.id,)))
    assert await store.list_routes() == [changed]
    assert [e.action for e in await store.list_audit()] == ["notify.route.add"]


async def test_notices_due_and_listed(store: Store) -> None:
    """Only pending notices due by now are due, oldest first; lists filter by route and
    request, newest first."""
    a = notice("route_a", "req_1", T0)
    b = notice("route_a", "req_2", T0 + timedelta(seconds=5))
    c = notice("route_b", "req_1", T0 + timedelta(seconds=1), status="sent", sent_at=T0)
    await store.commit(Write(at=T0, notices=(a, b, c)))
    assert [n.id for n in await store.due_notices(T0 + timedelta(seconds=10))] == [a.id, b.id]
    assert [n.id for n in await store.due_notices(T0)] == [a.id]
    assert [n.id for n in await store.list_notices(route_id="route_a")] == [b.id, a.id]
    assert [n.id for n in await store.list_notices(request_id="req_1")] == [c.id, a.id]
    failed = a.model_copy(update={"status": "failed", "attempts": 6, "last_error": "boom"})
    await store.commit(Write(at=T0, notices=(failed,)))
    assert [n.id for n in await store.due_notices(T0 + timedelta(seconds=10))] == [b.id]
    assert (await store.list_notices(request_id="req_1", route_id="route_a"))[0] == failed


async def test_person_links_by_kind_and_id(store: Store) -> None:
    """A link is found by (kind, external id), replaced by the same key, and removed."""
    slack = PersonLink(
        kind="slack", external_id="U0ALICE", name="alice", created_by="root", created_at=T0
    )
    mail = PersonLink(
        kind="email", external_id="bob@example.com", name="bob", created_by="root", created_at=T0
    )
    await store.commit(Write(at=T0, links=(slack, mail)))
    assert await store.get_link("slack", "U0ALICE") == slack
    assert await store.get_link("email", "U0ALICE") is None
    moved = slack.model_copy(update={"name": "carol"})
    await store.commit(Write(at=T0, links=(moved,)))
    assert await store.get_link("slack", "U0ALICE") == moved
    await store.commit(Write(at=T0, removed_links=(("email", "bob@example.com"),)))
    assert await store.list_links() == [moved]


async def test_a_nonce_is_used_once_even_at_once(store: Store) -> None:
    """Of many concurrent uses of one key exactly one wins; an ended key may be used again."""
    until = T0 + timedelta(minutes=5)
    wins = await asyncio.gather(*(store.use_nonce("k1", until, T0) for _ in range(8)))
    assert wins.count(True) == 1
    assert await store.use_nonce("k1", until, T0 + timedelta(minutes=1)) is False
    assert await store.use_nonce("k2", until, T0) is True
    assert await store.use_nonce("k1", until + timedelta(minutes=5), until) is True
