"""Webhooks are service operations: one admin check each, in process and over HTTP alike."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from signoff.backends import Backend, LocalBackend
from signoff.client import AsyncClient
from signoff.domain.principals import Principal
from signoff.domain.webhooks import Delivery
from signoff.errors import NotAllowed
from signoff.service import Service
from signoff.testing import ADMIN, AGENT, APPROVER, memory_service
from tests.serving import Server, free_port, new_token, start_server

Operation = Callable[[Backend], Awaitable[object]]

HOOK = "http://127.0.0.1:9/hook"
"""A private target: never sent to, and allowed only where the test says so."""

OPERATIONS: dict[str, Operation] = {
    "add": lambda b: b.add_webhook(HOOK),
    "list": lambda b: b.list_webhooks(),
    "remove": lambda b: b.remove_webhook("whk_unknown"),
    "deliveries": lambda b: b.list_deliveries(),
    "redeliver": lambda b: b.redeliver("dlv_unknown"),
}


@pytest.fixture
def service() -> Service:
    """A service on the memory store."""
    return memory_service()


@pytest.mark.parametrize("principal", [AGENT, APPROVER], ids=["agent", "approver"])
@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=list(OPERATIONS))
async def test_only_admins_manage_webhooks_in_process(
    service: Service, principal: Principal, operation: Operation
) -> None:
    """An agent or approver acting in process may not add, list, remove or redeliver webhooks."""
    await service.add_webhook(HOOK, ADMIN, allow_private=True)
    with pytest.raises(NotAllowed, match="only admins manage webhooks"):
        await operation(LocalBackend(service, principal))


async def test_an_approver_sees_no_webhook_secret_in_process(service: Service) -> None:
    """The list that hands out secrets is refused to an approver, in process as over HTTP."""
    await service.add_webhook(HOOK, ADMIN, secret="s3cret", allow_private=True)
    with pytest.raises(NotAllowed):
        await service.list_webhooks(APPROVER)
    (listed,) = await service.list_webhooks(ADMIN)
    assert listed.secret == "s3cret"


async def test_only_the_dispatcher_records_deliveries(service: Service) -> None:
    """Recording delivery attempts is an admin's (the dispatcher's) operation, not a caller's."""
    hook = await service.add_webhook(HOOK, ADMIN, allow_private=True)
    now = service.clock()
    delivery = Delivery(
        id="dlv_1",
        webhook_id=hook.id,
        event_seq=1,
        event_type="created",
        request_id="req_1",
        next_attempt_at=now,
        created_at=now,
    )
    for principal in (AGENT, APPROVER):
        with pytest.raises(NotAllowed):
            await service.record_deliveries((delivery,), principal)
    assert await service.list_deliveries(ADMIN) == []
    await service.record_deliveries((delivery,))
    assert [d.id for d in await service.list_deliveries(ADMIN)] == ["dlv_1"]


async def test_an_admin_adds_lists_and_removes(service: Service) -> None:
    """An admin's add, list and remove go through the service: removed hooks stay listed."""
    backend = LocalBackend(service, ADMIN)
    with pytest.raises(Exception, match="loopback"):
        await backend.add_webhook(HOOK)  # in process, a private target is refused
    hook = await service.add_webhook(HOOK, ADMIN, fmt="slack", allow_private=True)
    assert [w.id for w in await backend.list_webhooks()] == [hook.id]
    removed = await backend.remove_webhook(hook.id)
    assert not removed.active
    assert [w.active for w in await backend.list_webhooks()] == [False]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for this module's HTTP tests."""
    home = tmp_path_factory.mktemp("webhook-auth")
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "COLUMNS": "200"}
    running = start_server(f"sqlite:///{Path(home) / 'serve.db'}", free_port(), env)
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture(scope="module")
def tokens(served: Server) -> dict[str, str]:
    """An agent's and an approver's token on that server, by role."""
    made: dict[str, str] = {}
    for role in ("agent", "approver"):
        made[role] = new_token(served, f"a-{role}", role)[0]
    return made


@pytest.mark.parametrize("role", ["agent", "approver"])
@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=list(OPERATIONS))
async def test_only_admins_manage_webhooks_over_http(
    served: Server, tokens: dict[str, str], role: str, operation: Operation
) -> None:
    """An agent or approver may not add, list, remove or redeliver webhooks over HTTP."""
    async with AsyncClient(served.base, tokens[role]) as client:
        with pytest.raises(NotAllowed, match="only admins manage webhooks"):
            await operation(client)


async def test_the_old_webhook_functions_warn_and_still_work(service: Service) -> None:
    """signoff.webhooks.add_webhook / remove_webhook call the service, with a DeprecationWarning."""
    from signoff import webhooks

    with pytest.warns(DeprecationWarning, match="Service.add_webhook"):
        hook = await webhooks.add_webhook(service, ADMIN, HOOK, allow_private=True)
    with pytest.warns(DeprecationWarning, match="Service.remove_webhook"):
        assert not (await webhooks.remove_webhook(service, ADMIN, hook.id)).active
    with pytest.warns(DeprecationWarning, match="deprecated"), pytest.raises(NotAllowed):
        await webhooks.add_webhook(service, APPROVER, HOOK, allow_private=True)
